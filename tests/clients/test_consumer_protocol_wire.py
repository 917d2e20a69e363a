"""The consumer group protocol (KIP-848) on the wire, the same requests to Gregor and to Kafka
4.4.0: after a second member joins and the first gives up one of its two partitions and moves to a
new epoch, a commit at its old epoch is STALE_MEMBER_EPOCH for both partitions (Kafka 4.4 refuses
it whole at OffsetCommit v9, even for the partition still held), so is one at a future epoch,
and one at its epoch is taken."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupHeartbeatRequest
from tests.kit.both import GREGOR, KAFKA, started
from tests.kit.wire import WireClient

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]
Beat = ConsumerGroupHeartbeatRequest[0]
Commit = OffsetCommitRequest[9]


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    with started(request.param, tmp_path, {}, in_process=True, kafka_version=KAFKA_4) as b:
        yield b


def _beat(client: WireClient, member: str, epoch: int, owned: list[tuple[object, list[int]]] | None):
    return client.request(Beat(
        group_id="laggards", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000, subscribed_topic_names=["lagging"] if epoch == 0 else None,
        server_assignor="uniform" if epoch == 0 else None,
        topic_partitions=None if owned is None else [Beat.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned]))


def _held(answer) -> list[int]:
    if answer.assignment is None:
        return []
    return sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)


def _commit(client: WireClient, member: str, epoch: int, partitions: list[int]) -> list[int]:
    answer = client.request(Commit(
        group_id="laggards", generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
        topics=[Commit.OffsetCommitRequestTopic(name="lagging", partitions=[
            Commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=0, committed_leader_epoch=-1, committed_metadata=None)
            for p in partitions])]))
    return [p.error_code for t in answer.topics for p in t.partitions]


def test_commits_at_an_older_or_a_future_epoch_are_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lagging", 2, 1)])["lagging"].result(timeout=30)
    client = WireClient(broker.bootstrap)
    try:
        [topic] = client.request(MetadataRequest[12](
            topics=[MetadataRequest[12].MetadataRequestTopic(topic_id=None, name="lagging")],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)).topics
        deadline = time.monotonic() + 30
        first = _beat(client, "", 0, [])
        while first.error_code and time.monotonic() < deadline:  # Kafka's coordinator loads a moment
            time.sleep(0.2)
            first = _beat(client, "", 0, [])
        a, epoch_a = first.member_id, first.member_epoch
        while first.error_code == 0 and _held(first) != [0, 1] and time.monotonic() < deadline:
            time.sleep(0.2)  # the assignment comes with a later heartbeat
            first = _beat(client, a, epoch_a, None)
            epoch_a = first.member_epoch
        assert (first.error_code, _held(first)) == (0, [0, 1]), first
        tid = topic.topic_id
        second = _beat(client, "", 0, [])  # another member: one of a's partitions is to go to it
        assert second.error_code == 0, second
        held, epoch = [0, 1], epoch_a
        while True:  # a's heartbeats until its new assignment comes (Kafka computes it a moment later)
            revoke = _beat(client, a, epoch, [(tid, held)])
            assert revoke.error_code == 0, revoke
            if revoke.assignment is not None and _held(revoke) != held or time.monotonic() > deadline:
                break
            epoch = revoke.member_epoch  # an epoch at which a holds both
            time.sleep(0.2)
        kept = _held(revoke)
        assert len(kept) == 1, revoke  # a keeps one partition, gives up the other
        epoch_a = epoch
        moved = revoke
        while moved.member_epoch <= epoch_a and time.monotonic() < deadline:  # revoked: a moves on
            time.sleep(0.2)
            moved = _beat(client, a, moved.member_epoch, [(tid, kept)])
        assert moved.error_code == 0 and moved.member_epoch > epoch_a, moved
        gone = 1 - kept[0]
        # Kafka 4.4 refuses a commit at an older epoch whole, even for the partition a still holds
        assert _commit(client, a, epoch_a, [kept[0], gone]) == [ErrorCode.STALE_MEMBER_EPOCH] * 2
        assert _commit(client, a, moved.member_epoch + 5, [kept[0]]) == [ErrorCode.STALE_MEMBER_EPOCH]
        assert _commit(client, a, moved.member_epoch, [kept[0]]) == [ErrorCode.NONE]
    finally:
        client.close()
