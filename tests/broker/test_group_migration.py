"""Online migration between the group protocols (broker/groups/migration.py, classic_members.py)
through the wire APIs of an in-process broker, timers on trio's MockClock: a classic member that
a consumer-protocol member joins gives partitions up one JoinGroup at a time, commits at its
member epoch, is removed when it does not rejoin in time, survives a restart, and gets the group
back as a classic group when the consumer-protocol member leaves; the policies that forbid either
direction are kept. (tests/clients/test_group_migration.py runs real clients against Gregor and
Kafka 4.4.)"""

from __future__ import annotations

import trio
import trio.testing
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from broker.groups.classic_members import assigned_partitions
from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.broker.test_group_handlers import TOPIC
from tests.kit.inprocess import assignment, exchange, running_broker

GROUP = "rolling"
ALL = [0, 1, 2, 3]
SETTINGS = {"group.initial.rebalance.delay.ms": 0}


def run(test, tmp_path, **settings) -> None:
    async def main():
        async with running_broker(tmp_path, **{**SETTINGS, **settings}) as broker:
            if broker.topic(TOPIC) is None:
                broker.store.create_topic(TOPIC, 4, {})
            await test(broker)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.2))


def _subscription(owned: list[int]) -> bytes:
    S = ConsumerProtocolSubscription
    return bytes(S(version=1, topics=[TOPIC], user_data=None,
                   owned_partitions=[S.TopicPartition(topic=TOPIC, partitions=owned)] if owned else []).encode(version=1))


async def _join(broker, member_id: str, owned: list[int], rebalance_ms: int = 10_000):
    R = JoinGroupRequest[9]
    answer = await exchange(broker, R(
        group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
        group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=[R.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=_subscription(owned))]))
    if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        return await _join(broker, answer.member_id, owned, rebalance_ms)
    return answer


async def _sync(broker, member_id: str, generation: int, assigned: list[int] | None = None):
    R = SyncGroupRequest[5]
    given = [] if assigned is None else [R.SyncGroupRequestAssignment(member_id=member_id,
                                                                       assignment=assignment({TOPIC: assigned}))]
    answer = await exchange(broker, R(group_id=GROUP, generation_id=generation, member_id=member_id,
                                      group_instance_id=None, protocol_type="consumer",
                                      protocol_name="cooperative-sticky", assignments=given))
    if answer.error_code or not answer.assignment:
        return answer.error_code, []
    return answer.error_code, sorted(assigned_partitions(bytes(answer.assignment)).get(TOPIC, ()))


async def _heartbeat(broker, member_id: str, generation: int) -> int:
    return (await exchange(broker, HeartbeatRequest[4](group_id=GROUP, generation_id=generation, member_id=member_id,
                                                       group_instance_id=None))).error_code


async def _commit(broker, member_id: str, generation: int) -> int:
    R = OffsetCommitRequest[8]
    answer = await exchange(broker, R(
        group_id=GROUP, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
        topics=[R.OffsetCommitRequestTopic(name=TOPIC, partitions=[R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata=None)])]))
    return answer.topics[0].partitions[0].error_code


async def _beat(broker, member_id: str, epoch: int, owned: list[int] | None = None):
    R = ConsumerGroupHeartbeatRequest[0]
    topic_id = broker.store.topics()[TOPIC].topic_id
    return await exchange(broker, R(
        group_id=GROUP, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=10_000, subscribed_topic_names=[TOPIC] if epoch == 0 else None, server_assignor=None,
        topic_partitions=None if owned is None else [R.TopicPartitions(topic_id=topic_id, partitions=owned)]))


def _held(answer) -> list[int] | None:
    return None if answer.assignment is None else sorted(p for t in answer.assignment.topic_partitions
                                                          for p in t.partitions)


async def _group_type(broker) -> str:
    groups = (await exchange(broker, ListGroupsRequest[5](states_filter=[], types_filter=[]))).groups
    return next(g.group_type for g in groups if g.group_id == GROUP)


async def _classic_group(broker) -> tuple[str, int]:
    """A classic group whose one member holds every partition: (member id, generation)."""
    joined = await _join(broker, "", [])
    assert joined.error_code == 0 and joined.leader == joined.member_id
    assert await _sync(broker, joined.member_id, joined.generation_id, ALL) == (0, ALL)
    return joined.member_id, joined.generation_id


def test_a_classic_member_hands_partitions_to_a_joining_consumer_member_and_gets_them_back(tmp_path):
    async def test(broker):
        a, generation = await _classic_group(broker)
        b = await _beat(broker, "member-b", 0, [])
        assert (b.error_code, b.member_epoch, _held(b)) == (0, generation + 1, [])  # all still held by a
        assert await _group_type(broker) == "consumer"
        assert await _heartbeat(broker, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
        assert await _commit(broker, a, generation) == 0  # its epoch until it moves on
        again = await _join(broker, a, ALL)  # it still owns all: it must give half up at its epoch
        assert (again.error_code, again.generation_id, again.leader, again.protocol_type) == (0, generation, "", "consumer")
        code, kept = await _sync(broker, a, generation)
        assert code == 0 and len(kept) == 2
        assert await _heartbeat(broker, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
        moved = await _join(broker, a, kept)
        assert moved.generation_id == generation + 1 and await _sync(broker, a, moved.generation_id) == (0, kept)
        assert await _heartbeat(broker, a, moved.generation_id) == 0
        assert await _commit(broker, a, generation) == ErrorCode.ILLEGAL_GENERATION
        assert await _commit(broker, a, moved.generation_id) == 0
        taken = await _beat(broker, "member-b", b.member_epoch, [])
        assert _held(taken) == sorted(set(ALL) - set(kept))
        described = (await exchange(broker, ConsumerGroupDescribeRequest[1](
            group_ids=[GROUP], include_authorized_operations=False))).groups[0]
        assert sorted((m.member_id, m.member_type) for m in described.members) == sorted([(a, 0), ("member-b", 1)])

        gone = await _beat(broker, "member-b", -1)
        assert gone.error_code == 0 and await _group_type(broker) == "classic"  # downgraded with a in it
        assert await _heartbeat(broker, a, moved.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = await _join(broker, a, kept)
        assert rejoined.error_code == 0 and rejoined.leader == a and rejoined.generation_id > moved.generation_id
        assert await _sync(broker, a, rejoined.generation_id, ALL) == (0, ALL)

    run(test, tmp_path)


def test_a_classic_member_that_does_not_rejoin_within_its_rebalance_timeout_is_removed(tmp_path):
    async def test(broker):
        a, generation = await _classic_group(broker)
        assert (await _beat(broker, "member-b", 0, [])).error_code == 0
        assert await _heartbeat(broker, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
        await trio.sleep(5)
        assert (await _beat(broker, "member-b", 2, [])).error_code == 0  # b keeps its session
        await trio.sleep(6)  # a's rebalance timeout (10 s) runs out before its session would
        assert await _heartbeat(broker, a, generation) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _held(await _beat(broker, "member-b", 2, [])) == ALL

    run(test, tmp_path)


def test_a_consumer_group_with_a_classic_member_survives_a_restart(tmp_path):
    async def first(broker):
        a, generation = await _classic_group(broker)
        assert (await _beat(broker, "member-b", 0, [])).error_code == 0
        (tmp_path / "member").write_text(f"{a} {generation}")

    async def second(broker):
        a, generation = (tmp_path / "member").read_text().split()
        assert await _group_type(broker) == "consumer"
        assert await _heartbeat(broker, a, int(generation)) == ErrorCode.REBALANCE_IN_PROGRESS  # known, told to rejoin
        assert (await _join(broker, a, ALL)).error_code == 0

    run(first, tmp_path / "data")
    run(second, tmp_path / "data")


def test_the_migration_policy_keeps_a_group_on_its_protocol(tmp_path):
    async def disabled(broker):
        await _classic_group(broker)
        refused = await _beat(broker, "member-b", 0, [])
        assert (refused.error_code, await _group_type(broker)) == (ErrorCode.GROUP_ID_NOT_FOUND, "classic")

    async def upgrade_only(broker):
        a, generation = await _classic_group(broker)
        b = await _beat(broker, "member-b", 0, [])
        assert b.error_code == 0
        assert (await _beat(broker, "member-b", -1)).error_code == 0
        assert await _group_type(broker) == "consumer"  # no downgrade: a stays, a classic member of it
        assert await _heartbeat(broker, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS

    run(disabled, tmp_path / "disabled", **{"group.consumer.migration.policy": "disabled"})
    run(upgrade_only, tmp_path / "upgrade", **{"group.consumer.migration.policy": "UPGRADE"})


def test_a_silent_consumer_member_that_times_out_leaves_a_classic_group_behind(tmp_path):
    async def test(broker):
        a, generation = await _classic_group(broker)
        assert (await _beat(broker, "member-b", 0, [])).error_code == 0
        await _join(broker, a, ALL)
        _, kept = await _sync(broker, a, generation)
        moved = await _join(broker, a, kept)
        assert await _sync(broker, a, moved.generation_id) == (0, kept)
        for _ in range(10):  # a heartbeats, b says nothing: its session (45 s) runs out
            assert await _heartbeat(broker, a, moved.generation_id) in (0, ErrorCode.REBALANCE_IN_PROGRESS)
            await trio.sleep(5)
        assert await _group_type(broker) == "classic"
        assert await _heartbeat(broker, a, moved.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = await _join(broker, a, kept)
        assert rejoined.leader == a and await _sync(broker, a, rejoined.generation_id, ALL) == (0, ALL)

    run(test, tmp_path)
