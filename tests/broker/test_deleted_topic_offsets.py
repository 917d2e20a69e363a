"""A deleted topic's committed offsets go with it, as Kafka deletes them (its group coordinator's
onPartitionsDeleted): a group that committed on a topic finds no committed offset on a new topic
of the same name, and reads it from where its auto.offset.reset says, not from the old position.
Offsets of the group on other topics stay."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.kit.both import GREGOR, KAFKA, started
from tests.kit.wait import wait_until

SETTINGS = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), SETTINGS, in_process=True) as process:
        yield process


def _create(admin: KafkaAdminClient, bootstrap: str, name: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1)])
    wait_until(lambda: name in admin.list_topics(), 30, f"topic {name} listed")


def _produce(bootstrap: str, name: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(count):
        producer.send(name, f"v{i}".encode(), partition=0)
    producer.flush(30)
    producer.close()


def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        found = consumer.committed(tp)
        return None if found is None else found
    finally:
        consumer.close()


def test_deleting_a_topic_deletes_its_committed_offsets(broker):
    bootstrap = broker.bootstrap
    name, other, group = f"gone-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        for topic in (name, other):
            _create(admin, bootstrap, topic)
            _produce(bootstrap, topic, 5)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        consumer.commit({TopicPartition(name, 0): OffsetAndMetadata(4, "", -1),
                         TopicPartition(other, 0): OffsetAndMetadata(3, "", -1)})
        consumer.close()
        assert _committed(bootstrap, group, TopicPartition(name, 0)) == 4

        admin.delete_topics([name])
        wait_until(lambda: name not in admin.list_topics(), 30, f"topic {name} deleted")
        time.sleep(1)  # time passing on purpose: Kafka removes the partitions (and their offsets) after the listing
        _create(admin, bootstrap, name)
        _produce(bootstrap, name, 2)
        assert _committed(bootstrap, group, TopicPartition(name, 0)) is None
        assert _committed(bootstrap, group, TopicPartition(other, 0)) == 3

        reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                               auto_offset_reset="earliest", consumer_timeout_ms=5000)
        reader.assign([TopicPartition(name, 0)])
        assert [r.value for r in reader] == [b"v0", b"v1"]  # from the start of the new topic, not offset 4
        reader.close()
    finally:
        admin.close()
