"""Share groups (KIP-932) through confluent-kafka 2.16's ShareConsumer, each scenario against
Gregor and against Apache Kafka 4.4.0 (the first release line with share groups on by default):
members of one group read one partition cooperatively, each record going to one of them;
explicit acknowledgement RELEASEs a record (it comes back with delivery count 2) or REJECTs it
(it never comes back); a record whose acquisition lock runs out goes to another member; a record
released up to the delivery count limit is archived; the group is described as a share group.
A kill -9 in mid-flight loses nothing unacknowledged and redelivers nothing acknowledged (on
both brokers)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from tests.kit.both import GREGOR, KAFKA, started
from tests.kit.gregor import ROOT, start_broker
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupHeartbeatRequest
from protocol.kip932 import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.kit.inprocess import InProcessBroker
from tests.kit.kafka import KafkaBroker, KafkaUnavailable
from tests.kit.wire import WireClient

KAFKA_4 = "4.4.0"
LOCK_MS = 2000
# the same settings on both brokers: short locks, so expiry shows within a test
SETTINGS = {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS),
            "group.share.delivery.count.limit": "3"}
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    with started(request.param, tmp_path, SETTINGS, in_process=True, kafka_version=KAFKA_4) as b:
        yield b


def _setup(bootstrap: str, topic: str, group: str, records: int, **group_configs: str) -> None:
    """The topic with `records` records, and the group reading it from the earliest."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    _group_configs(bootstrap, group, **group_configs)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, str(i).encode())
    producer.flush(30)


def _group_configs(bootstrap: str, group: str, **group_configs: str) -> None:
    """The group reads from the earliest record, with these group configs."""
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer: its end cancels the call
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _member(bootstrap: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    member = ShareConsumer(config)
    member.subscribe([topic])
    return member


def _poll(member: ShareConsumer, seconds: float = 1.0) -> list:
    messages = member.poll(seconds) or []
    for m in messages:
        assert m.error() is None, m.error()
    return messages


def test_three_members_share_one_partition_each_record_once(broker):
    # a lock longer than the broker's 2 s: a loaded machine's poll loop must not outlast it (each
    # record is then delivered again to another member, as Kafka does)
    _setup(broker.bootstrap, "jobs", "workers", 0, **{"share.record.lock.duration.ms": "15000"})
    members = [_member(broker.bootstrap, "workers", "jobs") for _ in range(3)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    got: dict[int, list[int]] = {i: [] for i in range(3)}
    try:
        deadline = time.monotonic() + 90
        sent = 0
        while time.monotonic() < deadline and sum(map(len, got.values())) < 300:
            if sent < 300:  # a few records at a time, while every member polls
                for _ in range(10):
                    producer.produce("jobs", str(sent).encode())
                    sent += 1
                producer.flush(10)
            for i, member in enumerate(members):
                got[i] += [int(m.value()) for m in _poll(member, 0.2)]
        everything = [v for vs in got.values() for v in vs]
        assert sorted(everything) == list(range(300))  # each record to exactly one member
        assert sum(1 for vs in got.values() if vs) >= 2, {i: len(vs) for i, vs in got.items()}
        client = WireClient(broker.bootstrap)  # confluent-kafka 2.16's AdminClient has no share group type
        try:
            listed = client.request(ListGroupsRequest[5](states_filter=[], types_filter=["share"])).groups
        finally:
            client.close()
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
            ("workers", "share", "Stable", "share")]
    finally:
        for member in members:
            member.close()


def test_released_records_come_back_counted_and_rejected_ones_never(broker):
    _setup(broker.bootstrap, "tasks", "handlers", 10)
    member = _member(broker.bootstrap, "handlers", "tasks", explicit=True)
    seen: list[tuple[int, int]] = []  # (value, delivery count)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len({v for v, _ in seen}) < 10 or (
                time.monotonic() < deadline and not any(v == 3 and c == 2 for v, c in seen)):
            for m in _poll(member):
                value = int(m.value())
                seen.append((value, m.delivery_count()))
                if value == 3 and m.delivery_count() == 1:
                    member.acknowledge(m, AcknowledgeType.RELEASE)
                elif value == 5:
                    member.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
            member.commit_sync()
        extra = []  # nothing else comes back: 5 was rejected, the rest accepted
        end = time.monotonic() + 3
        while time.monotonic() < end:
            extra += [int(m.value()) for m in _poll(member, 0.5)]
        counts = Counter(v for v, _ in seen)
        assert counts[3] == 2 and (3, 2) in seen
        assert counts[5] == 1 and all(counts[v] == 1 for v in range(10) if v != 3)
        assert extra == []
    finally:
        member.close()


def test_an_expired_lock_sends_the_records_to_another_member(broker):
    _setup(broker.bootstrap, "expiring", "slow-and-fast", 5)
    slow = _member(broker.bootstrap, "slow-and-fast", "expiring", explicit=True)
    fast = _member(broker.bootstrap, "slow-and-fast", "expiring", explicit=True)
    try:
        taken: list = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(taken) < 5:
            taken += _poll(slow)  # acquired, never acknowledged: slow stops polling after this
        assert sorted(int(m.value()) for m in taken) == list(range(5))
        again: list = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(again) < 5:
            for m in _poll(fast):
                again.append((int(m.value()), m.delivery_count()))
                fast.acknowledge(m, AcknowledgeType.ACCEPT)
            fast.commit_sync()
        assert sorted(again) == [(v, 2) for v in range(5)]
    finally:
        fast.close()
        slow.close()


def test_a_record_released_up_to_the_delivery_limit_is_archived(broker):
    _setup(broker.bootstrap, "poison", "retriers", 1)  # share.delivery.count.limit=3 on both brokers
    member = _member(broker.bootstrap, "retriers", "poison", explicit=True)
    counts = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(counts) < 3:
            for m in _poll(member):
                counts.append(m.delivery_count())
                member.acknowledge(m, AcknowledgeType.RELEASE)
            member.commit_sync()
        end = time.monotonic() + 3
        while time.monotonic() < end:
            counts += [m.delivery_count() for m in _poll(member, 0.5)]
        assert counts == [1, 2, 3]
    finally:
        member.close()


def test_the_group_describes_as_a_share_group_with_its_members(broker):
    _setup(broker.bootstrap, "described", "describers", 3)
    members = [_member(broker.bootstrap, "describers", "described") for _ in range(2)]
    try:
        read = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and read < 3:
            for member in members:
                read += len(_poll(member, 0.3))
        client = WireClient(broker.bootstrap)
        try:
            deadline = time.monotonic() + 30
            while True:  # ShareGroupDescribe (confluent-kafka 2.16's AdminClient has no call for it)
                (group,) = client.request(ShareGroupDescribeRequest[1](
                    group_ids=["describers"], include_authorized_operations=False)).groups
                if len(group.members) == 2 or time.monotonic() > deadline:
                    break
                for member in members:
                    _poll(member, 0.3)
        finally:
            client.close()
        assert (group.error_code, group.group_state, group.assignor_name) == (0, "Stable", "simple")
        assert len(group.members) == 2 and group.group_epoch >= 2
        assert all([(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [("described", [0])]
                   for m in group.members)  # more members than partitions: both read partition 0
    finally:
        for member in members:
            member.close()


def test_a_consumer_group_id_is_not_a_share_group(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(timeout=30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "taken", "group.protocol": "consumer"})
    consumer.subscribe(["plain"])
    member = None
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        member = _member(broker.bootstrap, "taken", "plain")
        errors = []
        deadline = time.monotonic() + 10
        got = []
        while time.monotonic() < deadline:
            try:
                got += _poll(member, 0.5)
            except Exception as exc:  # the client raises the group's error to the application
                errors.append(str(exc))
                break
        assert got == []
    finally:
        consumer.close()
        if member is not None:
            member.close()


def test_a_share_groups_id_is_refused_to_classic_and_consumer_protocol_members(broker):
    _setup(broker.bootstrap, "queued", "queue-group", 0)
    member = _member(broker.bootstrap, "queue-group", "queued")
    client = WireClient(broker.bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the share member has joined
            _poll(member, 0.3)
            (group,) = client.request(ShareGroupDescribeRequest[1](
                group_ids=["queue-group"], include_authorized_operations=False)).groups
            if len(group.members) == 1 or time.monotonic() > deadline:
                break
        assert len(group.members) == 1
        joined = client.request(JoinGroupRequest[5](
            group_id="queue-group", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=b"")]))
        beat = client.request(ConsumerGroupHeartbeatRequest[0](
            group_id="queue-group", member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=10000, subscribed_topic_names=["queued"], server_assignor=None,
            topic_partitions=[]))
        C = OffsetCommitRequest[8]
        committed = client.request(C(
            group_id="queue-group", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(name="queued", partitions=[
                C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata=None)])]))
    finally:
        client.close()
        member.close()
    # as Kafka 4.4 answers: the classic join is an inconsistent protocol, the others "not found"
    assert (joined.error_code, beat.error_code, committed.topics[0].partitions[0].error_code) == (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_ID_NOT_FOUND), (
        joined, beat, committed)


def test_by_duration_starts_at_the_first_record_so_recent(broker):
    _setup(broker.bootstrap, "timed", "recent-only", 0, **{"share.auto.offset.reset": "by_duration:PT1H"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    now = int(time.time() * 1000)
    for i in range(10):  # 0-4 two hours old, 5-9 a minute old
        producer.produce("timed", str(i).encode(), timestamp=now - (7_200_000 if i < 5 else 60_000))
    producer.flush(30)
    member = _member(broker.bootstrap, "recent-only", "timed")
    got: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 5:
            got += [int(m.value()) for m in _poll(member)]
        end = time.monotonic() + 2
        while time.monotonic() < end:
            got += [int(m.value()) for m in _poll(member, 0.5)]
    finally:
        member.close()
    assert sorted(got) == [5, 6, 7, 8, 9]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for bad in ("by_duration:PT", "by_duration:-PT1H", "by_duration", "soonest"):
        resource = ConfigResource(ResourceType.GROUP, "recent-only", incremental_configs=[
            ConfigEntry("share.auto.offset.reset", bad, incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as refused:
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)
        error = refused.value.args[0]
        assert (error.code(), error.str()) == (ErrorCode.INVALID_CONFIG, (
            f"Invalid value {bad} for configuration share.auto.offset.reset: Invalid value `{bad}` for configuration "
            "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.")), error


def test_a_read_committed_group_never_gets_aborted_records(broker):
    _setup(broker.bootstrap, "txns", "committed-only", 0, **{"share.isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(30)
    for i, commit in enumerate([True, False, True]):  # the middle transaction is aborted
        producer.begin_transaction()
        for j in range(3):
            producer.produce("txns", f"{i}{j}".encode())
        producer.flush(30)  # written before the abort (else librdkafka drops them unsent)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    member = _member(broker.bootstrap, "committed-only", "txns")
    got: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 6:
            got += [m.value().decode() for m in _poll(member)]
        end = time.monotonic() + 3
        while time.monotonic() < end:
            got += [m.value().decode() for m in _poll(member, 0.5)]
    finally:
        member.close()
    assert sorted(got) == ["00", "01", "02", "20", "21", "22"]
    # on the wire: the aborted records (offsets 4-6; 3, 7 and 11 are the markers) are not acquired (a
    # client could not tell them: a ShareFetch answer lists no aborted transactions)
    _group_configs(broker.bootstrap, "committed-wire", **{"share.isolation.level": "read_committed"})
    client = WireClient(broker.bootstrap)
    try:
        member_id = str(uuid.uuid4())
        joined = client.request(ShareGroupHeartbeatRequest[1](
            group_id="committed-wire", member_id=member_id, member_epoch=0, rack_id=None,
            subscribed_topic_names=["txns"]))
        assert joined.error_code == 0
        Fetch = ShareFetchRequest[1]
        acquired, epoch = [], 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not acquired:  # Kafka initializes the group's start asynchronously
            answer = client.request(Fetch(
                group_id="committed-wire", member_id=member_id, share_session_epoch=epoch, max_wait_ms=500,
                min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                topics=[Fetch.FetchTopic(topic_id=_topic_id(client, "txns"), partitions=[
                    Fetch.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[])])],
                forgotten_topics_data=[]))
            epoch += 1
            assert answer.error_code == 0, answer
            for t in answer.responses:
                for part in t.partitions:
                    acquired += part.acquired_records
    finally:
        client.close()
    # Kafka 4.4 acquires the abort marker (7) with the committed records; clients skip it
    assert [(a.first_offset, a.last_offset) for a in acquired] == [(0, 3), (7, 11)]


class _Killable:
    """A broker of either kind that this test kills with SIGKILL and starts again on its data."""

    def __init__(self, kind: str, tmp_path) -> None:
        self.kind = kind
        if kind == GREGOR:
            self.process = start_broker(tmp_path, **SETTINGS)
            return
        try:
            self.process = KafkaBroker(tmp_path / "kafka", dict(SETTINGS), version=KAFKA_4)
        except KafkaUnavailable as e:
            pytest.skip(f"NOT RUN against Apache Kafka: {e}")
        self.process.start()

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def kill_9_and_start(self) -> None:
        if self.kind == GREGOR:
            self.process.stop(signal.SIGKILL)
        else:
            self.process.proc.kill()
            self.process.proc.wait()
        self.process.start()  # Kafka: on new ports, its storage kept

    def stop(self) -> None:
        self.process.stop()


@pytest.mark.parametrize("kind", [GREGOR, KAFKA])
def test_kill_9_mid_flight_redelivers_only_what_was_not_acknowledged(kind, tmp_path):
    broker = _Killable(kind, tmp_path)
    try:
        _setup(broker.bootstrap, "durable", "survivors", 20)
        member = _member(broker.bootstrap, "survivors", "durable", explicit=True)
        accepted, held = set(), set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(accepted) + len(held) < 20:
            for m in _poll(member):
                value = int(m.value())
                if value % 2 == 0:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(value)
                else:
                    held.add(value)  # acquired, not acknowledged when the broker dies
            member.commit_sync()
        assert len(accepted) == 10 and len(held) == 10
        broker.kill_9_and_start()
        member.close()
        after = _member(broker.bootstrap, "survivors", "durable")
        again = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(again) < 10:
            again += [int(m.value()) for m in _poll(after)]
        end = time.monotonic() + 2
        while time.monotonic() < end:
            again += [int(m.value()) for m in _poll(after, 0.5)]
        after.close()
        assert sorted(again) == sorted(held)  # nothing acknowledged came back, nothing held was lost
    finally:
        broker.stop()


def _topic_id(client: WireClient, topic: str):
    answer = client.request(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=topic)],
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    return answer.topics[0].topic_id


def test_bad_share_requests_get_kafkas_errors(broker):
    """On the wire, the same requests to both brokers: a ShareGroupHeartbeat for a consumer group's
    id, a ShareFetch with a wrong session epoch, and acknowledgements of an offset never acquired
    and of one acknowledged already. (A ShareFetch from a non-member is served by Kafka 4.4 as any
    other, records acquired: no error to compare.)"""
    _setup(broker.bootstrap, "strict", "strict-group", 3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic-owner",
                         "group.protocol": "consumer"})
    consumer.subscribe(["strict"])
    client = WireClient(broker.bootstrap)
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        clash = client.request(ShareGroupHeartbeatRequest[1](
            group_id="classic-owner", member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None,
            subscribed_topic_names=["strict"]))
        assert clash.error_code == ErrorCode.GROUP_ID_NOT_FOUND, clash
        member = str(uuid.uuid4())
        joined = client.request(ShareGroupHeartbeatRequest[1](
            group_id="strict-group", member_id=member, member_epoch=0, rack_id=None,
            subscribed_topic_names=["strict"]))
        assert joined.error_code == 0 and joined.member_epoch > 0
        topic_id = _topic_id(client, "strict")
        Fetch = ShareFetchRequest[1]
        Part = Fetch.FetchTopic.FetchPartition

        def fetch(who: str, epoch: int, acks=()) -> object:
            return client.request(Fetch(
                group_id="strict-group", member_id=who, share_session_epoch=epoch, max_wait_ms=2000, min_bytes=1,
                max_bytes=1 << 20, max_records=100, batch_size=100,
                topics=[Fetch.FetchTopic(topic_id=topic_id, partitions=[Part(partition_index=0, acknowledgement_batches=[
                    Part.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=[t]) for f, l, t in acks])])],
                forgotten_topics_data=[]))

        first = None
        deadline = time.monotonic() + 30
        epoch = 0
        while time.monotonic() < deadline:  # the group's start is initialized asynchronously by Kafka
            first = fetch(member, epoch)
            epoch += 1
            assert first.error_code == 0, first
            if first.responses and first.responses[0].partitions[0].acquired_records:
                break
        acquired = first.responses[0].partitions[0].acquired_records
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(0, 2, 1)]
        wrong_epoch = fetch(member, epoch + 5)
        assert wrong_epoch.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH, wrong_epoch
        Ack = ShareAcknowledgeRequest[1]
        AckPart = Ack.AcknowledgeTopic.AcknowledgePartition

        def acknowledge(first_offset: int, last_offset: int, kind: int) -> int:
            nonlocal epoch
            answer = client.request(Ack(
                group_id="strict-group", member_id=member, share_session_epoch=epoch, topics=[Ack.AcknowledgeTopic(
                    topic_id=topic_id, partitions=[AckPart(partition_index=0, acknowledgement_batches=[
                        AckPart.AcknowledgementBatch(first_offset=first_offset, last_offset=last_offset,
                                                     acknowledge_types=[kind])])])]))
            epoch += 1
            assert answer.error_code == 0, answer
            return answer.responses[0].partitions[0].error_code

        assert acknowledge(2, 2, AcknowledgeType.ACCEPT) == 0
        assert acknowledge(2, 2, AcknowledgeType.ACCEPT) == ErrorCode.INVALID_RECORD_STATE  # twice
        assert acknowledge(0, 1, AcknowledgeType.ACCEPT) == 0  # the start moves past 2
        assert acknowledge(0, 0, AcknowledgeType.ACCEPT) == 0  # below the start: done, ignored
        assert acknowledge(50, 50, AcknowledgeType.ACCEPT) == ErrorCode.INVALID_RECORD_STATE  # never acquired
    finally:
        client.close()
        consumer.close()


def test_offsets_of_an_empty_share_group_are_described_altered_and_deleted(broker):
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on the wire (what
    Kafka 4.4's kafka-share-groups sends), after a member accepted the first 5 of 10 records."""
    _setup(broker.bootstrap, "ledger", "auditors", 10)
    member = _member(broker.bootstrap, "auditors", "ledger", explicit=True)
    try:
        accepted = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and accepted < 5:
            for m in _poll(member):
                if m.offset() < 5:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted += 1
                else:
                    member.acknowledge(m, AcknowledgeType.RELEASE)
            member.commit_sync()
    finally:
        member.close()
    client = WireClient(broker.bootstrap)
    try:
        def described():
            Describe = DescribeShareGroupOffsetsRequest[1]
            (group,) = client.request(Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
                group_id="auditors", topics=None)])).groups
            assert group.error_code == 0, group
            return [(t.topic_name, p.partition_index, p.start_offset, p.lag) for t in group.topics for p in t.partitions]

        # 5 of 10 done: the lag is 5 on both; the start offset Kafka 4.4 reports stays 0 (its share
        # coordinator's snapshot keeps the acknowledged run), Gregor's moves to 5
        deadline = time.monotonic() + 30
        while [(t, p, lag) for t, p, _, lag in described()] != [("ledger", 0, 5)] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert [(t, p, lag) for t, p, _, lag in described()] == [("ledger", 0, 5)]
        Alter = AlterShareGroupOffsetsRequest[0]
        altered = client.request(Alter(group_id="auditors", topics=[Alter.AlterShareGroupOffsetsRequestTopic(
            topic_name="ledger", partitions=[Alter.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                partition_index=0, start_offset=2)])]))
        assert altered.error_code == 0 and altered.responses[0].partitions[0].error_code == 0, altered
        assert described() == [("ledger", 0, 2, 8)]
        Delete = DeleteShareGroupOffsetsRequest[0]
        deleted = client.request(Delete(group_id="auditors", topics=[
            Delete.DeleteShareGroupOffsetsRequestTopic(topic_name="ledger")]))
        assert deleted.error_code == 0 and deleted.responses[0].error_code == 0, deleted
        assert described() == []
    finally:
        client.close()


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


def test_gregor_group_lists_describes_resets_and_deletes_a_share_group(tmp_path):
    with InProcessBroker(tmp_path / "data", **SETTINGS) as broker:
        _setup(broker.bootstrap, "inbox", "readers", 10)
        member = _member(broker.bootstrap, "readers", "inbox", explicit=True)
        try:
            accepted = 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and accepted < 4:
                for m in _poll(member):
                    kind = AcknowledgeType.ACCEPT if m.offset() < 4 else AcknowledgeType.RELEASE
                    member.acknowledge(m, kind)
                    accepted += kind == AcknowledgeType.ACCEPT
                member.commit_sync()
            listed = _gregor("group", "list", "--bootstrap", broker.bootstrap, "-o", "json")
            assert {"group": "readers", "state": "Stable", "protocol_type": "share"} in json.loads(listed.stdout)
            busy = _gregor("group", "reset-offsets", "readers", "--topic", "inbox", "--to-earliest", "--execute",
                           "--bootstrap", broker.bootstrap)
            assert busy.returncode == 1 and "active member" in busy.stderr and "Traceback" not in busy.stderr
            described = json.loads(_gregor("group", "describe", "readers", "--bootstrap", broker.bootstrap,
                                           "-o", "json").stdout)
            assert (described["type"], described["state"], described["assignor"]) == ("share", "Stable", "simple")
            assert [m["assignment"] for m in described["members"]] == [[{"topic": "inbox", "partition": 0}]]
            assert described["offsets"] == [{"topic": "inbox", "partition": 0, "start_offset": 4, "lag": 6}]
        finally:
            member.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the member's leave reaches the coordinator
            reset = _gregor("group", "reset-offsets", "readers", "--topic", "inbox", "--to-earliest", "--execute",
                            "--bootstrap", broker.bootstrap, "-o", "json")
            if reset.returncode == 0:
                break
            time.sleep(0.5)
        assert json.loads(reset.stdout) == [{"topic": "inbox", "partition": 0, "old_offset": 4, "new_offset": 0,
                                             "error": None}]
        again = _member(broker.bootstrap, "readers", "inbox")
        try:
            values = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(values) < 10:
                values += [int(m.value()) for m in _poll(again)]
            assert sorted(values) == list(range(10))  # from the start again
        finally:
            again.close()
        deadline = time.monotonic() + 30
        while (deleted := _gregor("group", "delete", "readers", "--bootstrap", broker.bootstrap)).returncode != 0:
            assert time.monotonic() < deadline, deleted.stderr
            time.sleep(0.5)
        gone = _gregor("group", "describe", "readers", "--bootstrap", broker.bootstrap)
        assert gone.returncode == 1 and "readers" in gone.stderr and "Traceback" not in gone.stderr


def test_rejected_and_spent_records_go_to_the_groups_dead_letter_topic(broker):
    """KIP-1191 (Kafka 4.4): a REJECTed record, and one released up to the delivery limit (3 here),
    are written to the group's errors.deadletterqueue.topic.name with headers naming where they came
    from; with errors.deadletterqueue.copy.record.enable their key and value too."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dlq.orders", 1, 1, config={"errors.deadletterqueue.group.enable": "true"})])[
        "dlq.orders"].result(timeout=30)
    _setup(broker.bootstrap, "orders", "billing", 4, **{"errors.deadletterqueue.topic.name": "dlq.orders",
                                                         "errors.deadletterqueue.copy.record.enable": "true"})
    member = _member(broker.bootstrap, "billing", "orders", explicit=True)
    try:
        done = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(done) < 4:
            for m in _poll(member):
                value = int(m.value())
                if value == 1:
                    member.acknowledge(m, AcknowledgeType.REJECT)
                    done.add(value)
                elif value == 2:
                    member.acknowledge(m, AcknowledgeType.RELEASE)
                    if m.delivery_count() == 3:
                        done.add(value)
                else:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
                    done.add(value)
            member.commit_sync()
        assert done == {0, 1, 2, 3}
    finally:
        member.close()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dlq-reader", "auto.offset.reset": "earliest"})
    reader.subscribe(["dlq.orders"])
    dead = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(dead) < 2:
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                dead.append(m)
    finally:
        reader.close()
    shown = sorted((m.value(), {k: v.decode() for k, v in m.headers() if k.startswith("__dlq.")}) for m in dead)
    assert shown == [
        (b"1", {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "0", "__dlq.errors.offset": "1",
                "__dlq.errors.group": "billing", "__dlq.errors.delivery.count": "1",
                "__dlq.errors.message": "Offset rejected by client."}),
        (b"2", {"__dlq.errors.topic": "orders", "__dlq.errors.partition": "0", "__dlq.errors.offset": "2",
                "__dlq.errors.group": "billing", "__dlq.errors.delivery.count": "3",
                "__dlq.errors.message": "Offset delivery count exceeded the threshold."})]


def test_an_internal_dead_letter_topic_name_is_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "careless", incremental_configs=[
        ConfigEntry("errors.deadletterqueue.topic.name", "__orders", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as refused:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
    assert "INVALID_CONFIG" in str(refused.value) or "InvalidConfig" in str(refused.value), refused.value


def test_a_released_record_comes_back_after_the_groups_retry_delay(tmp_path):
    """Gregor's gregor.share.release.delay.ms (RocketMQ's retry delays; Kafka redelivers at once)."""
    with InProcessBroker(tmp_path / "data", **SETTINGS) as broker:
        _setup(broker.bootstrap, "retries", "retriers", 1, **{"gregor.share.release.delay.ms": "1500"})
        member = _member(broker.bootstrap, "retriers", "retries", explicit=True)
        try:
            seen = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(seen) < 2:
                for m in _poll(member, 0.1):
                    seen.append((m.delivery_count(), time.monotonic()))
                    member.acknowledge(m, AcknowledgeType.RELEASE if m.delivery_count() == 1 else AcknowledgeType.ACCEPT)
                member.commit_sync()
            assert [count for count, _ in seen] == [1, 2]
            assert seen[1][1] - seen[0][1] >= 1.4  # not at once: after the delay
        finally:
            member.close()
