"""A cluster's answers to requests sent to a node that does not coordinate their consumer group
or transactional id: NOT_COORDINATOR, in each API's place for it, with the connection kept
open (clients then look the coordinator up again). Raw Kafka protocol, no client library: what
a client sends when its coordinator moved (a failover) and its metadata is stale. Runs on
clusters only (`--cluster`); on one node every key is coordinated there."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, DescribeTransactionsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from tests.kit.wire import WireClient

NOT_COORDINATOR = 16
GROUP_KEY, TRANSACTION_KEY = 0, 1


@pytest.fixture
def cluster_only(target):
    if target.broker_count < 2:
        pytest.skip("a cluster scenario: on one node every key is coordinated there")


def _brokers(bootstrap: str) -> dict[int, str]:
    client = WireClient(bootstrap.split(",")[0])
    try:
        return {b.node_id: f"{b.host}:{b.port}" for b in client.request(MetadataRequest[1](topics=[])).brokers}
    finally:
        client.close()


def _coordinator(bootstrap: str, key: str, key_type: int, timeout: float = 30.0) -> int:
    """The coordinator's node id (Kafka creates its internal topic on the first lookup, and
    answers COORDINATOR_NOT_AVAILABLE until it is there)."""
    deadline = time.monotonic() + timeout
    while True:
        client = WireClient(bootstrap.split(",")[0])
        try:
            found = client.request(FindCoordinatorRequest[3](key=key, key_type=key_type))
        finally:
            client.close()
        if found.error_code == 0:
            return found.node_id
        assert time.monotonic() < deadline, f"no coordinator for {key!r}: {found}"
        time.sleep(0.3)


def _elsewhere(bootstrap: str, coordinator: int) -> WireClient:
    other = next(address for node, address in sorted(_brokers(bootstrap).items()) if node != coordinator)
    return WireClient(other)


def test_group_requests_at_a_node_not_coordinating_the_group_answer_not_coordinator(
        cluster_only, bootstrap, new_topic, name):
    topic = new_topic(1)
    wire = _elsewhere(bootstrap, _coordinator(bootstrap, name, GROUP_KEY))
    try:
        join = wire.request(JoinGroupRequest[5](
            group_id=name, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=b"")]))
        assert (join.error_code, join.generation_id, join.members) == (NOT_COORDINATOR, -1, [])
        sync = wire.request(SyncGroupRequest[3](group_id=name, generation_id=1, member_id="m",
                                                group_instance_id=None, assignments=[]))
        assert (sync.error_code, sync.assignment) == (NOT_COORDINATOR, b"")
        assert wire.request(HeartbeatRequest[3](group_id=name, generation_id=1, member_id="m",
                                                group_instance_id=None)).error_code == NOT_COORDINATOR
        leave = wire.request(LeaveGroupRequest[3](group_id=name, members=[
            LeaveGroupRequest[3].MemberIdentity(member_id="m", group_instance_id=None)]))
        assert (leave.error_code, leave.members) == (NOT_COORDINATOR, [])
        Topic = OffsetCommitRequest[7].OffsetCommitRequestTopic
        commit = wire.request(OffsetCommitRequest[7](
            group_id=name, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[Topic(name=topic, partitions=[Topic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])]))
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in commit.topics] == \
            [(topic, [(0, NOT_COORDINATOR)])]
        fetched = wire.request(OffsetFetchRequest[7](group_id=name, topics=None, require_stable=False))
        assert (fetched.error_code, fetched.topics) == (NOT_COORDINATOR, [])
        fetched = wire.request(OffsetFetchRequest[8](groups=[OffsetFetchRequest[8].OffsetFetchRequestGroup(
            group_id=name, topics=None)], require_stable=False))
        assert [(g.group_id, g.error_code) for g in fetched.groups] == [(name, NOT_COORDINATOR)]
        described = wire.request(DescribeGroupsRequest[5](groups=[name], include_authorized_operations=False))
        assert [(g.group_id, g.error_code) for g in described.groups] == [(name, NOT_COORDINATOR)]
        deleted = wire.request(DeleteGroupsRequest[2](groups_names=[name]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(name, NOT_COORDINATOR)]
        # the connection was kept through all of it
        assert wire.request(MetadataRequest[1](topics=[topic])).topics[0].error_code == 0
    finally:
        wire.close()


def test_transaction_requests_at_a_node_not_coordinating_the_id_answer_not_coordinator(
        cluster_only, bootstrap, name):
    wire = _elsewhere(bootstrap, _coordinator(bootstrap, name, TRANSACTION_KEY))
    try:
        init = wire.request(InitProducerIdRequest[3](transactional_id=name, transaction_timeout_ms=60000,
                                                     producer_id=-1, producer_epoch=-1))
        assert (init.error_code, init.producer_id, init.producer_epoch) == (NOT_COORDINATOR, -1, -1)
        assert wire.request(AddOffsetsToTxnRequest[3](transactional_id=name, producer_id=1000, producer_epoch=0,
                                                      group_id=name)).error_code == NOT_COORDINATOR
        assert wire.request(EndTxnRequest[3](transactional_id=name, producer_id=1000, producer_epoch=0,
                                             committed=True)).error_code == NOT_COORDINATOR
        described = wire.request(DescribeTransactionsRequest[0](transactional_ids=[name]))
        assert [(s.transactional_id, s.error_code) for s in described.transaction_states] == \
            [(name, NOT_COORDINATOR)]
        assert wire.request(MetadataRequest[1](topics=[])).brokers  # the connection was kept
    finally:
        wire.close()


def test_txn_offset_commit_at_a_node_not_coordinating_the_group_answers_not_coordinator(
        cluster_only, bootstrap, new_topic, name):
    """TxnOffsetCommit goes to the consumer group's coordinator (not the transaction's)."""
    topic = new_topic(1)
    wire = _elsewhere(bootstrap, _coordinator(bootstrap, name, GROUP_KEY))
    try:
        Topic = TxnOffsetCommitRequest[3].TxnOffsetCommitRequestTopic
        answer = wire.request(TxnOffsetCommitRequest[3](
            transactional_id=f"{name}-txn", group_id=name, producer_id=1000, producer_epoch=0, generation_id=-1,
            member_id="", group_instance_id=None, topics=[Topic(name=topic, partitions=[
                Topic.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                      committed_leader_epoch=-1, committed_metadata="")])]))
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics] == \
            [(topic, [(0, NOT_COORDINATOR)])]
    finally:
        wire.close()
