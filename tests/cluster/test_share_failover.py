"""A share group (KIP-932) across the failover of its broker group's master: the share-partition's
state is a record of the replicated commitlog, written and held by the sync-state set before an
acknowledgement is answered, so the new master delivers again exactly what was acquired and not
acknowledged, and never what was. The same scenario runs against a 3-node Kafka 4.4.0 whose
partition leader is killed."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka.protocol.metadata import MetadataRequest

from tests.cluster.load import create_topic
from tests.kit.both import KAFKA
from tests.kit.kafka import KafkaUnavailable
from tests.kit.kafka_cluster import KafkaCluster
from tests.kit.wire import WireClient

KAFKA_4 = "4.4.0"

pytestmark = [pytest.mark.crash, pytest.mark.clients]


def _poll(member: ShareConsumer, seconds: float = 1.0) -> list:
    messages = [m for m in member.poll(seconds) or [] if m.error() is None]
    return messages


def _held_come_back_acknowledged_never(bootstrap: str, crash) -> None:
    """20 records to a share group; 10 ACCEPTed, 10 acquired and never acknowledged; `crash()`; a
    new member then gets exactly the 10 never acknowledged."""
    member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "workers",
                            "share.acknowledgement.mode": "explicit"})
    member.subscribe(["tasks"])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    accepted, held = set(), set()
    try:
        deadline = time.monotonic() + 60
        sent = False
        while time.monotonic() < deadline and len(accepted) + len(held) < 20:
            messages = _poll(member, 0.5)
            if not sent:  # once the member is in (a new share group starts at the end: Kafka's default)
                for i in range(20):
                    producer.produce("tasks", str(i).encode())
                assert producer.flush(30) == 0
                sent = True
            for m in messages:
                value = int(m.value())
                if value % 2 == 0:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(value)
                else:
                    held.add(value)  # acquired, never acknowledged
            member.commit_sync()
        assert (len(accepted), len(held)) == (10, 10)
        crash()
    finally:
        member.close()
    after = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "workers"})
    after.subscribe(["tasks"])
    again = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(again) < 10:
            again += [int(m.value()) for m in _poll(after)]
        end = time.monotonic() + 3
        while time.monotonic() < end:
            again += [int(m.value()) for m in _poll(after, 0.5)]
    finally:
        after.close()
    assert sorted(again) == sorted(held)  # nothing acknowledged came back, nothing held was lost


def test_a_share_group_survives_the_sigkill_of_its_master(broker_group):
    group = broker_group(3)
    create_topic(group, "tasks", partitions=1)

    def crash() -> None:
        old = group.master()
        group.kill(old)
        group.master(timeout=30, other_than=old)

    _held_come_back_acknowledged_never(group.bootstrap, crash)


def _leader(cluster: KafkaCluster, topic: str) -> int:
    """The node leading partition 0 of `topic`, as a live node's Metadata says."""
    for node in cluster.nodes.values():
        if node.proc is None or node.proc.poll() is not None:
            continue
        client = WireClient(node.bootstrap)
        try:
            [found] = client.request(MetadataRequest[1](topics=[topic])).topics
            return found.partitions[0].leader_id
        finally:
            client.close()
    raise AssertionError("no live node")


@pytest.mark.kafka_version(KAFKA_4)
@pytest.mark.parametrize("kind", [KAFKA])
def test_a_share_group_survives_the_sigkill_of_its_partitions_leader_on_kafka(kind, tmp_path):
    """The same against a 3-node Kafka 4.4.0: the share-partition lives at the partition's leader
    (its state at the share coordinator's), and the node leading the partition is killed."""
    try:
        cluster = KafkaCluster(tmp_path / "kafka", {"offsets.topic.replication.factor": "3"}, version=KAFKA_4)
    except KafkaUnavailable as e:
        pytest.skip(f"NOT RUN against Apache Kafka: {e}")
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("tasks", 1, 3)])["tasks"].result(timeout=60)
        resource = ConfigResource(ResourceType.GROUP, "workers", incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=60)

        def crash() -> None:
            leader = _leader(cluster, "tasks")
            cluster.kill(leader)
            deadline = time.monotonic() + 60
            while _leader(cluster, "tasks") in (leader, -1) and time.monotonic() < deadline:
                time.sleep(0.5)

        _held_come_back_acknowledged_never(cluster.bootstrap, crash)
    finally:
        cluster.stop()
