"""KIP-848's consumer group protocol with librdkafka's `group.protocol=consumer` (confluent-kafka
2.16) against Gregor: the broker assigns the partitions, two members split six 3/3, a member that
leaves hands its partitions over, every record is read once, offsets are committed at the member's
epoch, and the group describes as a consumer-protocol group. (Against Kafka 4.4 the same scenario
runs once issue 55's second reference lands; Kafka 3.9 does not serve this protocol by default.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from tests.kit.gregor import ROOT
from tests.kit.inprocess import InProcessBroker

RECORDS = 300


@pytest.fixture
def broker(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("orders", 6, 1)])["orders"].result(timeout=30)
        producer = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(RECORDS):
            producer.produce("orders", str(i).encode(), partition=i % 6)
        producer.flush(30)
        yield b


STALE_MEMBER_EPOCH = ErrorCode.STALE_MEMBER_EPOCH


def _consumer(broker, group: str, **extra) -> Consumer:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})
    consumer.subscribe(["orders"])
    return consumer


def _wait_for_assignment(consumer: Consumer, partitions: int, seconds: float = 30) -> None:
    """Poll until the broker has assigned the member `partitions` partitions (or the time is up)."""
    deadline = time.monotonic() + seconds
    while len(consumer.assignment()) < partitions and time.monotonic() < deadline:
        consumer.poll(0.2)


def _poll_until(consumers: dict[str, Consumer], done, seconds: float, got: dict[str, list]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done():
        for name, consumer in consumers.items():
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                got[name].append((message.partition(), message.offset()))
                _commit(consumer, message)


def _commit(consumer: Consumer, message, tries: int = 50) -> None:
    """Commit `message`'s offset; again while the member's epoch is stale. A heartbeat can move the
    member to a new epoch between its read and its commit (another member joined or left), and a
    commit at the old epoch is refused (STALE_MEMBER_EPOCH, as Kafka 4.4 refuses it) until
    librdkafka's heartbeat thread has taken the new one."""
    for attempt in range(tries):
        try:
            consumer.commit(message, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() != STALE_MEMBER_EPOCH or attempt == tries - 1:
                raise
            time.sleep(0.1)


def test_two_members_split_six_partitions_and_hand_over_when_one_leaves(broker):
    a, b = _consumer(broker, "billing"), _consumer(broker, "billing")
    got = {"a": [], "b": []}
    try:
        _poll_until({"a": a, "b": b}, lambda: len(got["a"]) + len(got["b"]) >= RECORDS, 60, got)
        assert len(got["a"]) + len(got["b"]) == RECORDS
        parts_a = {p.partition for p in a.assignment()}
        parts_b = {p.partition for p in b.assignment()}
        assert (len(parts_a), len(parts_b), parts_a | parts_b, parts_a & parts_b) == (3, 3, set(range(6)), set())
        read = got["a"] + got["b"]
        assert len(set(read)) == RECORDS  # every record once
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = admin.describe_consumer_groups(["billing"])["billing"].result(timeout=30)
        assert str(described.type).endswith("CONSUMER") and len(described.members) == 2
        listed = admin.list_consumer_groups().result(timeout=30).valid
        assert [str(g.type) for g in listed if g.group_id == "billing"][0].endswith("CONSUMER")
        b.close()
        deadline = time.monotonic() + 60
        while {p.partition for p in a.assignment()} != set(range(6)) and time.monotonic() < deadline:
            a.poll(0.2)
        assert {p.partition for p in a.assignment()} == set(range(6))
        committed = a.committed([TopicPartition("orders", p) for p in range(6)], timeout=30)
        assert sum(tp.offset for tp in committed) == RECORDS  # the members committed at their epochs
    finally:
        a.close()


def test_the_console_shows_a_consumer_protocol_groups_members_and_their_epochs(tmp_path):
    with InProcessBroker(tmp_path / "data", admin_port=0) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: a dropped client ends its futures
        admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
        consumer = _consumer(b, "shown")
        try:
            _wait_for_assignment(consumer, 2)
            with urllib.request.urlopen(f"http://{b.admin}/v1/groups/shown", timeout=10) as answer:
                group = json.loads(answer.read())
            (member,) = group["members"]
            assert group["state"] == "Stable" and member["member_epoch"] >= 1
            assert member["assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
        finally:
            consumer.close()


def test_a_consumer_protocol_group_survives_a_restart_of_the_broker(tmp_path):
    """Its epochs, members and assignments are state records of the commitlog: a restarted broker
    describes the same member at the same epoch with the same partitions (its session restarted)."""
    def described(bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        found = admin.describe_consumer_groups(["kept"])["kept"].result(timeout=30)
        return [(m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in found.members]

    with InProcessBroker(tmp_path / "data") as first:
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)
        consumer = _consumer(first, "kept")
        _wait_for_assignment(consumer, 3)
        before = described(first.bootstrap)
        epoch = first.broker.coordinator.consumer_groups["kept"].members[before[0][0]].assignment.epoch
    try:
        with InProcessBroker(tmp_path / "data") as second:
            assert described(second.bootstrap) == before == [(before[0][0], [0, 1, 2])]
            member = second.broker.coordinator.consumer_groups["kept"].members[before[0][0]]
            assert member.assignment.epoch == epoch
    finally:
        consumer.close()


def test_gregor_group_describe_shows_member_epochs_and_target_assignments(tmp_path):
    with InProcessBroker(tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
        consumer = _consumer(b, "epochs")
        try:
            _wait_for_assignment(consumer, 2)
            command = [sys.executable, "-m", "broker", "group", "describe", "epochs", "--bootstrap", b.bootstrap]
            shown = json.loads(subprocess.run(command + ["--output", "json"], cwd=ROOT, capture_output=True,
                                              text=True, timeout=60, check=True).stdout)
            (member,) = shown["members"]
            assert (shown["type"], shown["state"], shown["assignor"]) == ("consumer", "Stable", "uniform")
            assert member["member_epoch"] == shown["group_epoch"] >= 1
            expected = [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]
            assert member["assignment"] == member["target_assignment"] == expected
            text = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
            assert "TYPE              consumer (KIP-848)" in text and "TARGET-ASSIGNMENT" in text
        finally:
            consumer.close()
