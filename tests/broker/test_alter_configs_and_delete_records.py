"""AlterConfigs, IncrementalAlterConfigs and DeleteRecords on the wire, against Gregor and a real
Apache Kafka 3.9.0 with the same requests: error codes and messages, what DescribeConfigs and
ListOffsets say afterwards. Where Gregor refuses a config it cannot honour (a compact-only topic
under a finite log.retention.bytes, a topic retention above the broker-wide one), the test says
so per broker."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaProducer
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.kit.wire import APPEND, DELETE, SET, WireClient, incremental, legacy
from tests.kit.wire import create_topic as create
from tests.kit.wire import describe_configs as describe
from tests.kit.gregor import start_broker
from tests.kit.both import GREGOR, KAFKA, connect, started

SETTINGS = {"auto.create.topics.enable": "false"}
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC, INVALID_CONFIG = 0, 1, 3, 40


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), SETTINGS, in_process=True) as process:
        yield request.param, process


@pytest.fixture
def client(broker):
    c = connect(broker[1])
    yield c
    c.close()


def settled(client: WireClient, topic: str, *names: str, until) -> dict[str, tuple[str, int]]:
    """DescribeConfigs once `until` holds for it, or its last answer after 15 s: Kafka's broker
    applies an altered config when the controller's metadata reaches it, a moment after the
    answer (Gregor before answering)."""
    deadline = time.monotonic() + 15
    while True:
        configs = describe(client, topic, *names)
        if until(configs) or time.monotonic() > deadline:
            return configs
        time.sleep(0.05)


def delete_records(client: WireClient, topic: str, offset: int, partition: int = 0) -> tuple[int, int]:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    r = client.request(DeleteRecordsRequest[2](topics=[T(name=topic, partitions=[
        T.DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=15000))
    p = r.topics[0].partitions[0]
    return p.error_code, p.low_watermark


def earliest(client: WireClient, topic: str) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    r = client.request(ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)])]))
    return r.topics[0].partitions[0].offset


def test_incremental_set_and_delete_change_what_describe_configs_says(client):
    topic, error, _ = create(client)
    assert error == NONE
    assert incremental(client, topic, ("retention.ms", SET, "3600000"), ("max.message.bytes", SET, "2000")) == (NONE, None)
    expected = {"retention.ms": ("3600000", 1), "max.message.bytes": ("2000", 1)}  # 1: DYNAMIC_TOPIC_CONFIG
    assert settled(client, topic, "retention.ms", "max.message.bytes", until=lambda c: c == expected) == expected
    assert incremental(client, topic, ("retention.ms", DELETE, None)) == (NONE, None)
    assert settled(client, topic, "retention.ms", until=lambda c: c["retention.ms"][1] != 1)["retention.ms"][1] != 1
    assert incremental(client, topic, ("max.message.bytes", SET, "4000"), validate_only=True) == (NONE, None)
    assert describe(client, topic, "max.message.bytes")["max.message.bytes"] == ("2000", 1)


def test_legacy_alter_configs_replaces_every_override(client):
    topic, _, _ = create(client, {"max.message.bytes": "2000"})
    assert legacy(client, topic, {"retention.ms": "3600000"}) == (NONE, None)
    configs = settled(client, topic, "retention.ms", "max.message.bytes",
                      until=lambda c: c["retention.ms"] == ("3600000", 1) and c["max.message.bytes"][1] != 1)
    assert configs["retention.ms"] == ("3600000", 1) and configs["max.message.bytes"][1] != 1


def test_refusals_carry_kafkas_error_and_message(client):
    topic, _, _ = create(client)
    assert incremental(client, topic, ("retention.ms", APPEND, "5")) == (
        INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    error, message = incremental(client, topic, ("retention.ms", SET, "soon"))
    assert error == INVALID_CONFIG and "retention.ms" in message
    error, _ = incremental(client, f"missing-{uuid.uuid4().hex[:6]}", ("retention.ms", SET, "1000"))
    assert error == UNKNOWN_TOPIC


def test_a_per_topic_setting_takes_effect_at_once(broker, client):
    topic, _, _ = create(client)
    producer = KafkaProducer(bootstrap_servers=broker[1].bootstrap, retries=0)
    producer.send(topic, b"x" * 3000).get(30)
    assert incremental(client, topic, ("max.message.bytes", SET, "2000")) == (NONE, None)
    settled(client, topic, "max.message.bytes", until=lambda c: c["max.message.bytes"] == ("2000", 1))
    if broker[0] == KAFKA:
        # Kafka's broker publishes a metadata image to DescribeConfigs a moment before its log
        # manager applies the config in it: a send in that moment is still taken (CI saw one).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                producer.send(topic, b"x" * 3000).get(30)
            except Exception:
                break
            time.sleep(0.1)
    with pytest.raises(Exception, match="MessageSizeTooLarge|MESSAGE_TOO_LARGE|too large"):
        producer.send(topic, b"x" * 3000).get(30)
    producer.close()


def test_delete_records_moves_the_log_start_offset(broker, client):
    topic, _, _ = create(client)
    producer = KafkaProducer(bootstrap_servers=broker[1].bootstrap, linger_ms=0)
    for i in range(10):
        producer.send(topic, str(i).encode(), partition=0).get(30)
    producer.close()
    assert delete_records(client, topic, 4) == (NONE, 4)
    assert earliest(client, topic) == 4
    assert delete_records(client, topic, 2) == (NONE, 4)  # below the log start: nothing moves
    assert delete_records(client, topic, 11)[0] == OFFSET_OUT_OF_RANGE
    assert delete_records(client, topic, -1) == (NONE, 10)  # -1: up to the high watermark
    assert delete_records(client, topic, 0, partition=5)[0] == UNKNOWN_TOPIC


def test_compacted_topics_and_longer_retention_are_accepted(client):
    """cleanup.policy=compact and a topic keeping data longer than the broker default (-1:
    forever) are honoured by both (Gregor's log cleaner: docs/operations.md, *Log compaction*)."""
    assert create(client, {"cleanup.policy": "compact"})[1] == NONE
    topic, _, _ = create(client)
    assert incremental(client, topic, ("cleanup.policy", SET, "compact,delete")) == (NONE, None)
    assert incremental(client, topic, ("cleanup.policy", SET, "shred"))[0] == INVALID_CONFIG
    assert create(client, {"retention.ms": "-1"})[1] == NONE
    assert create(client, {"cleanup.policy": "delete", "retention.ms": "60000"})[1] == NONE
    assert create(client, {"retention.ms": "-2"})[1] == INVALID_CONFIG


def test_a_compacted_topic_refuses_a_record_without_a_key(client):
    topic, _, _ = create(client, {"cleanup.policy": "compact"})
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=b"k", value=b"v", headers=[])
    b.append(1, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    T = ProduceRequest.TopicProduceData
    r = client.request(ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(b.build()))])]))
    p = r.responses[0].partition_responses[0]
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert (p.error_code, p.base_offset, p.error_message) == (
        87, -1, ("One or more records have been rejected due to 1 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{why}')]"))
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [(1, why)]


def test_every_keyless_record_of_a_batch_is_listed_in_the_record_errors(client):
    """10 keyless records in a batch of 100 to a compacted topic: each of the 10 is named (a client
    fails those 10 as invalid and the other 90 as failed because of them); the message shows three."""
    topic, _, _ = create(client, {"cleanup.policy": "compact"})
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    keyless = list(range(5, 100, 10))
    for i in range(100):
        b.append(i, timestamp=int(time.time() * 1000), key=None if i in keyless else b"k%d" % i, value=b"v", headers=[])
    T = ProduceRequest.TopicProduceData
    r = client.request(ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(b.build()))])]))
    p = r.responses[0].partition_responses[0]
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in keyless[:3])
    assert (p.error_code, p.base_offset, p.error_message) == (
        87, -1, ("One or more records have been rejected due to 10 record errors in total, and only showing the "
        f"first three errors at most: [{shown}]"))
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [(i, why) for i in keyless]


def test_gregor_keeps_altered_configs_and_the_log_start_across_a_restart(tmp_path):
    process = start_broker(tmp_path, **SETTINGS)
    try:
        client = WireClient(process.bootstrap)
        topic, _, _ = create(client)
        producer = KafkaProducer(bootstrap_servers=process.bootstrap)
        for i in range(5):
            producer.send(topic, str(i).encode(), partition=0).get(30)
        producer.close()
        assert incremental(client, topic, ("retention.ms", SET, "3600000")) == (NONE, None)
        assert delete_records(client, topic, 3) == (NONE, 3)
        client.close()
        process.stop()
        process.start()
        client = WireClient(process.bootstrap)
        assert describe(client, topic, "retention.ms")["retention.ms"] == ("3600000", 1)
        assert earliest(client, topic) == 3
        client.close()
    finally:
        process.stop()
