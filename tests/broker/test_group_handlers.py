"""Group APIs through protocol.codec against an in-process broker, beyond what
the Kafka recordings cover: other versions, batching, timers on trio's
MockClock, and committed offsets across a restart.
"""

from __future__ import annotations

import trio
import trio.testing
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from protocol.api_versions import API_SPECS
from protocol.errors import ErrorCode
from tests.kit.inprocess import assignment, exchange, running_broker, subscription

TOPIC = "orders"


def run(test, tmp_path, **settings) -> None:
    async def main():
        async with running_broker(tmp_path, **settings) as broker:
            if broker.topic(TOPIC) is None:
                broker.store.create_topic(TOPIC, 4, {})
            await test(broker)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.2))


async def join(broker, version: int, group: str, member_id: str = "", session: int = 10_000,
               instance_id: str | None = None, protocols=(("range", None),)):
    R = JoinGroupRequest[version]
    req = R(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=session, member_id=member_id,
            group_instance_id=instance_id, protocol_type="consumer", reason=None,
            protocols=[R.JoinGroupRequestProtocol(name=n, metadata=m or subscription([TOPIC])) for n, m in protocols])
    return await exchange(broker, req)


async def join_and_sync(broker, group: str, join_version: int = 9, sync_version: int = 5):
    first = await join(broker, join_version, group)
    member_id = first.member_id
    if first.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        first = await join(broker, join_version, group, member_id)
    assert first.error_code == 0
    R = SyncGroupRequest[sync_version]
    synced = await exchange(broker, R(group_id=group, generation_id=first.generation_id, member_id=member_id,
                                      group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                      assignments=[R.SyncGroupRequestAssignment(
                                          member_id=member_id, assignment=assignment({TOPIC: [0, 1, 2, 3]}))]))
    assert synced.error_code == 0
    return member_id, first.generation_id, synced


async def describe(broker, group: str, version: int = 5, operations: bool = False):
    return (await exchange(broker, DescribeGroupsRequest[version](
        groups=[group], include_authorized_operations=operations))).groups[0]


def test_join_v0_gets_a_member_id_without_member_id_required(tmp_path):
    async def test(broker):
        started = trio.current_time()
        response = await join(broker, 0, "old-client")
        assert response.error_code == 0 and response.member_id.startswith("kafka-probe-")
        assert response.generation_id == 1 and response.leader == response.member_id
        assert trio.current_time() - started >= 3.0  # the initial rebalance delay

    run(test, tmp_path)


def test_join_v9_and_sync_v5_carry_protocol_type_and_name(tmp_path):
    async def test(broker):
        member_id, generation, synced = await join_and_sync(broker, "modern")
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        assert synced.assignment == assignment({TOPIC: [0, 1, 2, 3]})
        hb = await exchange(broker, HeartbeatRequest[4](group_id="modern", generation_id=generation,
                                                        member_id=member_id, group_instance_id=None))
        assert hb.error_code == 0

    run(test, tmp_path)


def test_sync_with_another_protocol_name_is_inconsistent(tmp_path):
    async def test(broker):
        member_id, generation, _ = await join_and_sync(broker, "g")
        R = SyncGroupRequest[5]
        response = await exchange(broker, R(group_id="g", generation_id=generation, member_id=member_id,
                                            group_instance_id=None, protocol_type="consumer",
                                            protocol_name="roundrobin", assignments=[]))
        assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    run(test, tmp_path)


def test_silent_member_expires_after_its_session_timeout(tmp_path):
    async def test(broker):
        await join_and_sync(broker, "quiet")
        assert (await describe(broker, "quiet")).group_state == "Stable"
        await trio.sleep(9.9)
        assert (await describe(broker, "quiet")).group_state == "Stable"
        await trio.sleep(0.2)
        group = await describe(broker, "quiet")
        assert (group.group_state, group.members) == ("Empty", [])

    run(test, tmp_path)


def test_leave_group_v3_batch_answers_each_member(tmp_path):
    async def test(broker):
        member_id, _, _ = await join_and_sync(broker, "batch")
        R = LeaveGroupRequest[3]
        response = await exchange(broker, R(group_id="batch", members=[
            R.MemberIdentity(member_id=member_id, group_instance_id=None),
            R.MemberIdentity(member_id="stranger", group_instance_id=None)]))
        assert response.error_code == 0
        assert [(m.member_id, m.error_code) for m in response.members] == [
            (member_id, 0), ("stranger", ErrorCode.UNKNOWN_MEMBER_ID)]
        assert (await describe(broker, "batch")).group_state == "Empty"

    run(test, tmp_path)


def test_leave_group_v0_reports_the_member_error_at_top_level(tmp_path):
    async def test(broker):
        await join_and_sync(broker, "single")
        response = await exchange(broker, LeaveGroupRequest[0](group_id="single", member_id="stranger"))
        assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID

    run(test, tmp_path)


async def commit(broker, group: str, parts: dict[int, tuple[int, str | None]], version: int = 9,
                 generation: int = -1, member_id: str = ""):
    R = OffsetCommitRequest[version]
    T = R.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return await exchange(broker, R(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
        retention_time_ms=-1, topics=[T(name=TOPIC, partitions=[
            P(partition_index=p, committed_offset=o, committed_leader_epoch=3, committed_metadata=m)
            for p, (o, m) in parts.items()])]))


def test_member_commit_round_trips_leader_epoch_and_metadata(tmp_path):
    async def test(broker):
        member_id, generation, _ = await join_and_sync(broker, "committer")
        response = await commit(broker, "committer", {2: (11, "meta")}, generation=generation, member_id=member_id)
        assert response.topics[0].partitions[0].error_code == 0
        R = OffsetFetchRequest[7]
        fetched = await exchange(broker, R(group_id="committer", require_stable=True, topics=[
            R.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[2])]))
        p = fetched.topics[0].partitions[0]
        assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (11, 3, "meta")

    run(test, tmp_path)


def test_commit_to_a_partition_that_does_not_exist_is_refused(tmp_path):
    async def test(broker):
        response = await commit(broker, "g", {0: (1, None), 9: (1, None)})
        assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
            (0, 0), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    run(test, tmp_path)


def test_commit_with_a_generation_to_an_unknown_group_is_illegal_generation(tmp_path):
    async def test(broker):
        response = await commit(broker, "nobody-here", {0: (1, None)}, generation=3, member_id="m")
        assert response.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION

    run(test, tmp_path)


def test_offset_fetch_v8_answers_several_groups_at_once(tmp_path):
    async def test(broker):
        await commit(broker, "first", {0: (5, "a")})
        await commit(broker, "second", {1: (6, None)})
        R = OffsetFetchRequest[8]
        G = R.OffsetFetchRequestGroup
        response = await exchange(broker, R(require_stable=False, groups=[
            G(group_id="first", topics=None),
            G(group_id="second", topics=[G.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])])]))
        first, second = response.groups
        assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
                for t in first.topics] == [(TOPIC, [(0, 5, "a")])]
        assert [(p.partition_index, p.committed_offset) for p in second.topics[0].partitions] == [(0, -1), (1, 6)]

    run(test, tmp_path)


def test_committed_offsets_and_their_groups_survive_a_restart(tmp_path):
    async def first_life(broker):
        await commit(broker, "durable", {3: (77, "kept")})

    async def second_life(broker):
        R = OffsetFetchRequest[7]
        fetched = await exchange(broker, R(group_id="durable", topics=None, require_stable=False))
        p = fetched.topics[0].partitions[0]
        assert (p.partition_index, p.committed_offset, p.metadata) == (3, 77, "kept")
        listed = await exchange(broker, ListGroupsRequest[4](states_filter=[]))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("durable", "Empty")]

    run(first_life, tmp_path)
    run(second_life, tmp_path)


def test_list_groups_filters_by_state_and_type(tmp_path):
    async def test(broker):
        await join_and_sync(broker, "busy")
        await commit(broker, "idle", {0: (1, None)})
        by_state = await exchange(broker, ListGroupsRequest[4](states_filter=["stable"]))
        assert [g.group_id for g in by_state.groups] == ["busy"]
        classic = await exchange(broker, ListGroupsRequest[5](states_filter=[], types_filter=["classic"]))
        assert sorted(g.group_id for g in classic.groups) == ["busy", "idle"]
        assert {g.group_type for g in classic.groups} == {"classic"}
        other = await exchange(broker, ListGroupsRequest[5](states_filter=[], types_filter=["consumer"]))
        assert other.groups == []

    run(test, tmp_path)


def test_describe_groups_reports_operations_only_when_asked(tmp_path):
    async def test(broker):
        await join_and_sync(broker, "g")
        assert (await describe(broker, "g", operations=False)).authorized_operations is None
        assert (await describe(broker, "g", operations=True)).authorized_operations == {3, 6, 8, 10, 11}
        assert (await describe(broker, "g", version=0)).members[0].client_id == "kafka-probe"

    run(test, tmp_path)


def test_delete_groups_only_deletes_empty_groups(tmp_path):
    async def test(broker):
        await join_and_sync(broker, "active")
        await commit(broker, "idle", {0: (1, None)})
        response = await exchange(broker, DeleteGroupsRequest[2](groups_names=["active", "idle", "ghost"]))
        assert [(r.group_id, r.error_code) for r in response.results] == [
            ("active", ErrorCode.NON_EMPTY_GROUP), ("idle", 0), ("ghost", ErrorCode.GROUP_ID_NOT_FOUND)]

    run(test, tmp_path)


def test_find_coordinator_answers_this_broker_for_groups_and_transactions(tmp_path):
    async def test(broker):
        v0 = await exchange(broker, FindCoordinatorRequest[0](key="g"))
        assert (v0.error_code, v0.node_id, v0.port) == (0, broker.node_id, broker.advertised_port)
        txn = await exchange(broker, FindCoordinatorRequest[6](key_type=1, coordinator_keys=["tx"]))
        assert (txn.coordinators[0].error_code, txn.coordinators[0].node_id) == (0, broker.node_id)

    run(test, tmp_path)


def test_every_advertised_group_api_version_round_trips(tmp_path):
    """Each version of each group API encodes, decodes and is answered."""
    async def test(broker):
        for version in range(API_SPECS[11].min_version, API_SPECS[11].max_version + 1):
            member_id, generation, _ = await join_and_sync(broker, f"v{version}", join_version=version,
                                                           sync_version=min(version, 5))
            for hb in range(API_SPECS[12].min_version, API_SPECS[12].max_version + 1):
                response = await exchange(broker, HeartbeatRequest[hb](
                    group_id=f"v{version}", generation_id=generation, member_id=member_id, group_instance_id=None))
                assert response.error_code == 0, (version, hb)
        for version in range(API_SPECS[8].min_version, API_SPECS[8].max_version + 1):
            response = await commit(broker, "c", {0: (version, "x")}, version=version)
            assert response.topics[0].partitions[0].error_code == 0, version
        for version in range(API_SPECS[9].min_version, 8):
            R = OffsetFetchRequest[version]
            response = await exchange(broker, R(group_id="c", require_stable=False, topics=[
                R.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
            assert response.topics[0].partitions[0].committed_offset == API_SPECS[8].max_version, version
        for version in range(API_SPECS[15].min_version, API_SPECS[15].max_version + 1):
            assert (await describe(broker, "v9", version=version)).group_state == "Stable"
        for version in range(API_SPECS[16].min_version, API_SPECS[16].max_version + 1):
            response = await exchange(broker, ListGroupsRequest[version](states_filter=[], types_filter=[]))
            assert len(response.groups) == 11, version
        for version in range(API_SPECS[10].min_version, API_SPECS[10].max_version + 1):
            response = await exchange(broker, FindCoordinatorRequest[version](
                key="g", key_type=0, coordinator_keys=["g"]))
            node = response.coordinators[0].node_id if version >= 4 else response.node_id
            assert node == broker.node_id, version
        for version in range(API_SPECS[42].min_version, API_SPECS[42].max_version + 1):
            response = await exchange(broker, DeleteGroupsRequest[version](groups_names=["missing"]))
            assert response.results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

    run(test, tmp_path, **{"group.initial.rebalance.delay.ms": 0})
