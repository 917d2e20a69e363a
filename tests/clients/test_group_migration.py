"""A rolling upgrade of a consumer group from the classic protocol to the consumer protocol
(KIP-848's online migration, `group.consumer.migration.policy`, Kafka 4's default
`bidirectional`), with confluent-kafka 2.16's consumers against Gregor and Kafka 4.4.0: a member
using the consumer protocol joins a classic group that is consuming, the group becomes a consumer
group with both members sharing the partitions and no record lost; when that member leaves, the
group becomes classic again and the classic member takes every partition back. With the policy
`disabled` the member is refused (GROUP_ID_NOT_FOUND) and the classic group goes on."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kit.both import GREGOR, KAFKA, started

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]
TOPIC, PARTITIONS = "migrating", 4
# heartbeats every half second (consumer protocol: the broker's setting; classic: the client's)
SETTINGS = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
            "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    with started(request.param, tmp_path, SETTINGS, in_process=True, kafka_version=KAFKA_4) as b:
        yield b


def _produce(bootstrap: str, start: int, count: int) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"record-{i}" for i in range(start, start + count)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return set(values)


def _consumer(bootstrap: str, group: str, protocol: str, assignor: str = "cooperative-sticky") -> Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200}
    if protocol == "classic":
        settings.update({"partition.assignment.strategy": assignor, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 500})
    consumer = Consumer(settings)
    consumer.subscribe([TOPIC])
    return consumer


def _poll(consumers: list[Consumer], seen: dict[int, list[str]]) -> None:
    for i, consumer in enumerate(consumers):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            seen.setdefault(i, []).append(message.value().decode())


def _until(consumers: list[Consumer], seen: dict[int, list[str]], done, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what}: never happened"
        _poll(consumers, seen)


def _held(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _group_type(admin: AdminClient, group: str) -> str:
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return description.type.name


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"])  # the classic member's: cooperative, eager
def test_a_consumer_protocol_member_joins_a_classic_group_and_leaves_it_classic_again(broker, assignor):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=30)
    written = _produce(broker.bootstrap, 0, 400)
    seen: dict[int, list[str]] = {}
    classic = _consumer(broker.bootstrap, "rolling", "classic", assignor)
    modern = None
    try:
        _until([classic], seen, lambda: _held(classic) == set(range(PARTITIONS)) and len(seen.get(0, [])) >= 100,
               "the classic member holds every partition")
        assert _group_type(admin, "rolling") == "CLASSIC"
        modern = _consumer(broker.bootstrap, "rolling", "consumer")
        both = [classic, modern]
        _until(both, seen, lambda: _held(classic) and _held(modern) and not _held(classic) & _held(modern)
               and _held(classic) | _held(modern) == set(range(PARTITIONS)), "the partitions shared by both members")
        assert _group_type(admin, "rolling") == "CONSUMER"
        written |= _produce(broker.bootstrap, 400, 40)
        _until(both, seen, lambda: written <= {v for vs in seen.values() for v in vs}, "every record read")
        assert set(seen.get(1, [])), "the consumer-protocol member read nothing"
        modern.close()
        modern = None
        _until([classic], seen, lambda: _held(classic) == set(range(PARTITIONS)), "the classic member takes all back")
        assert _group_type(admin, "rolling") == "CLASSIC"
        written |= _produce(broker.bootstrap, 440, 40)
        _until([classic], seen, lambda: written <= {v for vs in seen.values() for v in vs}, "every record read")
    finally:
        for consumer in (classic, modern):
            if consumer is not None:
                consumer.close()


@pytest.fixture(params=[GREGOR, KAFKA])
def no_migration(request, tmp_path):
    settings = {**SETTINGS, "group.consumer.migration.policy": "disabled"}
    with started(request.param, tmp_path, settings, in_process=True, kafka_version=KAFKA_4) as b:
        yield b


def test_without_migration_a_consumer_protocol_member_is_refused_by_a_classic_group(no_migration):
    admin = AdminClient({"bootstrap.servers": no_migration.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=30)
    _produce(no_migration.bootstrap, 0, 40)
    seen: dict[int, list[str]] = {}
    classic = _consumer(no_migration.bootstrap, "kept-classic", "classic")
    modern = None
    try:
        _until([classic], seen, lambda: _held(classic) == set(range(PARTITIONS)), "the classic member holds all")
        modern = _consumer(no_migration.bootstrap, "kept-classic", "consumer")
        deadline, error = time.monotonic() + 30, None
        while error is None and time.monotonic() < deadline:
            _poll([classic], seen)
            try:
                message = modern.poll(0.1)
            except KafkaException as exc:
                error = exc.args[0]
            else:
                error = message.error() if message is not None else None
        # librdkafka makes the refusal fatal to the consumer, naming GROUP_ID_NOT_FOUND's message
        assert error is not None and error.code() == KafkaError._FATAL and "The group id does not exist" in error.str(), error
        assert _held(classic) == set(range(PARTITIONS)) and _group_type(admin, "kept-classic") == "CLASSIC"
    finally:
        for consumer in (classic, modern):
            if consumer is not None:
                consumer.close()
