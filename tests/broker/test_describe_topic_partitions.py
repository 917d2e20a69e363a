"""DescribeTopicPartitions (KIP-966, what Kafka 4's kafka-topics --describe sends), the same requests
to Gregor and to Kafka 4.4.0: topics sorted by name, at most ResponsePartitionLimit partitions per
answer and a cursor to go on from, unknown topics answered UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from protocol.errors import ErrorCode
from protocol.kip966 import DescribeTopicPartitionsRequest
from tests.kit.both import GREGOR, KAFKA
from tests.kit.inprocess import InProcessBroker
from tests.kit.kafka import KafkaBroker, KafkaUnavailable
from tests.kit.wire import WireClient

KAFKA_4 = "4.4.0"
pytestmark = pytest.mark.kafka_version(KAFKA_4)


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def bootstrap(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == GREGOR:
        broker = InProcessBroker(tmp / "data").start()
    else:
        try:
            broker = KafkaBroker(tmp / "kafka", {}, version=KAFKA_4)
        except KafkaUnavailable as e:
            pytest.skip(f"NOT RUN against Apache Kafka: {e}")
        broker.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("dtp-a", 3, 1), NewTopic("dtp-b", 2, 1), NewTopic("dtp-c", 1, 1)])
        admin.close()
        deadline = time.monotonic() + 30  # Kafka's brokers learn new topics from the controller a moment later
        while any(error for error, _, _ in _ask(broker.bootstrap, ["dtp-a", "dtp-b", "dtp-c"], 2000)[0]):
            assert time.monotonic() < deadline, "the topics were not created"
            time.sleep(0.2)
        yield broker.bootstrap
    finally:
        broker.stop()


def _ask(bootstrap: str, names: list[str], limit: int, cursor: tuple[str, int] | None = None):
    R = DescribeTopicPartitionsRequest[0]
    client = WireClient(bootstrap)
    try:
        answer = client.request(R(topics=[R.TopicRequest(name=n) for n in names], response_partition_limit=limit,
                                  cursor=None if cursor is None else R.Cursor(topic_name=cursor[0],
                                                                              partition_index=cursor[1])))
    finally:
        client.close()
    shown = [(t.error_code, t.name, [(p.error_code, p.partition_index, len(p.replica_nodes), len(p.isr_nodes))
                                     for p in t.partitions]) for t in answer.topics]
    nxt = None if answer.next_cursor is None else (answer.next_cursor.topic_name, answer.next_cursor.partition_index)
    return shown, nxt


def test_pages_of_partitions_with_a_cursor(bootstrap):
    names = ["dtp-c", "dtp-a", "dtp-b"]  # answered sorted
    first, cursor = _ask(bootstrap, names, 4)
    assert first == [(0, "dtp-a", [(0, 0, 1, 1), (0, 1, 1, 1), (0, 2, 1, 1)]), (0, "dtp-b", [(0, 0, 1, 1)])]
    assert cursor == ("dtp-b", 1)
    rest, end = _ask(bootstrap, names, 4, cursor)
    assert rest == [(0, "dtp-b", [(0, 1, 1, 1)]), (0, "dtp-c", [(0, 0, 1, 1)])] and end is None


def test_a_page_ending_with_a_topic_points_at_the_next(bootstrap):
    page, cursor = _ask(bootstrap, ["dtp-a", "dtp-b"], 3)
    assert [(name, len(parts)) for _, name, parts in page] == [("dtp-a", 3)]
    assert cursor == ("dtp-b", 0)


def test_an_unknown_topic_is_answered_with_its_error(bootstrap):
    page, cursor = _ask(bootstrap, ["dtp-a", "dtp-missing"], 2000)
    assert page[1] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "dtp-missing", []) and cursor is None
