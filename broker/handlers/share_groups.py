"""ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and ShareAcknowledge: share groups of
KIP-932 (Kafka's KafkaApis.handleShareGroupHeartbeat, handleShareFetchRequest and friends). Topics
travel by id on the wire and by name in broker/groups/share_coordinator.py; this module
translates, reads the acquired records' batches from the store, and waits for records the way
Fetch does (an append, or released records, or MaxWaitMs)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import trio

from broker.groups.share_coordinator import SessionError
from broker.groups.share_group import ShareHeartbeat
from broker.net.peer import peer_host
from broker.security.acl import Op, Res
from protocol.codec import Request
from protocol.errors import ErrorCode
from protocol.record_batch import ATTRIBUTES_OFFSET, CONTROL_BIT
from store import CorruptData, OffsetOutOfRange, UnknownPartition, UnknownTopic

if TYPE_CHECKING:
    from broker.broker import Broker

READ_COMMITTED = "read_committed"


async def handle_share_group_heartbeat(broker: Broker, request: Request):
    body = request.body
    cls = request.spec.response[request.header.api_version]
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return cls(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                   member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    subscribed = None
    if body.subscribed_topic_names is not None:  # topics it may not describe are left out, as Kafka does
        subscribed = tuple(t for t in body.subscribed_topic_names if broker.permits(Op.DESCRIBE, Res.TOPIC, t))
    beat = ShareHeartbeat(member_id=body.member_id, member_epoch=body.member_epoch, rack_id=body.rack_id,
                          subscribed_names=subscribed, client_id=request.header.client_id or "",
                          client_host=peer_host.get())
    answer = await broker.share.heartbeat(body.group_id, beat, broker.subscribable_topics(), broker.share_offsets)
    assignment = None
    if answer.assignment is not None:
        ids = {name: meta.topic_id for name, meta in broker.store.topics().items()}
        assignment = cls.Assignment(topic_partitions=[
            cls.Assignment.TopicPartitions(topic_id=ids[t], partitions=sorted(ps))
            for t, ps in sorted(answer.assignment.items()) if t in ids])
    return cls(throttle_time_ms=0, error_code=answer.error, error_message=answer.message,
               member_id=answer.member_id if not answer.error else None,
               member_epoch=answer.member_epoch if not answer.error else -1,
               heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)


async def handle_share_group_describe(broker: Broker, request: Request):
    cls = request.spec.response[request.header.api_version]
    Group = cls.DescribedGroup
    Member = Group.Member
    Assignment = Member.Assignment
    Partitions = Assignment.TopicPartitions
    topics = broker.store.topics()
    groups = []
    for group_id in request.body.group_ids:
        def failed(code: int, message: str | None) -> object:
            return Group(error_code=code, error_message=message, group_id=group_id, group_state="Dead",
                         group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[])
        if not broker.allowed(Op.DESCRIBE, Res.GROUP, group_id):
            groups.append(failed(ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        if not broker.coordinates(group_id):
            groups.append(failed(ErrorCode.NOT_COORDINATOR, None))
            continue
        group = broker.share.describe(group_id)
        if group is None:
            if broker.share.clashes(group_id) or broker.coordinator.consumer_group(group_id) is not None:
                groups.append(failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."))
            elif group_id in broker.share.known_groups():
                groups.append(Group(error_code=0, error_message=None, group_id=group_id, group_state="Empty",
                                    group_epoch=0, assignment_epoch=0, assignor_name="simple", members=[]))
            else:
                groups.append(failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
            continue
        members = [Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch, client_id=m.client_id,
                          client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed),
                          assignment=Assignment(topic_partitions=[
                              Partitions(topic_id=topics[t].topic_id, topic_name=t, partitions=sorted(ps))
                              for t, ps in sorted(m.assignment.items()) if t in topics]))
                   for m in group.members.values()]
        groups.append(Group(error_code=0, error_message=None, group_id=group_id, group_state=group.state.capitalize(),
                            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                            assignor_name="simple", members=members))
    return cls(throttle_time_ms=0, groups=groups)


async def _durable(broker: Broker, changed: list) -> int:
    """Write the acknowledged share-partitions' state and wait until the broker group's sync-state
    set holds it (as a commit's offsets): an acknowledged record is never delivered again, even
    after a failover. An error code for the acknowledgements when either fails."""
    if not changed:
        return ErrorCode.NONE
    error = await broker.share.persist(changed)
    if error:
        return error
    replicated = await broker.replicated()
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if replicated else ErrorCode.NONE


def _acknowledge(broker: Broker, body, names, member: str, refused: set[str]) -> tuple[dict, list]:
    """Apply the request's acknowledgement batches: {(topic, partition): error}, and the keys to write."""
    results, changed = {}, []
    for t in body.topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            if name is None:
                results[(t.topic_id, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if name in refused:
                results[(t.topic_id, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
            results[(t.topic_id, p.partition_index)] = broker.share.acknowledge(
                body.group_id, member, name, p.partition_index, batches)
            changed.append((body.group_id, name, p.partition_index))
    return results, changed


def _read_acquired(broker: Broker, topic: str, partition: int, runs,
                   committed: bool) -> tuple[list[bytes], list[tuple[int, int]]]:
    """The batches holding the acquired offsets, whole (clients keep only the acquired records),
    and, for a read_committed group, the offset ranges of the batches of aborted transactions among
    them (left out of the batches; their abort markers stay, as control records clients skip)."""
    out, aborted, covered = [], [], -1
    store = broker.store
    for first, last, _ in runs:
        offset = max(first, covered + 1)
        while offset <= last:
            result = store.read(topic, partition, offset, 1 << 20, committed)
            if not result.batches:
                break
            for batch in result.batches:
                base = int.from_bytes(batch[0:8], "big")
                end = base + int.from_bytes(batch[23:27], "big")  # last offset delta
                if end < offset:
                    continue
                # an aborted transaction's records (not its marker: acquired, as Kafka does)
                if committed and not batch[ATTRIBUTES_OFFSET + 1] & CONTROL_BIT and store.aborted_batch(
                        topic, partition, batch, base, end + 1):
                    aborted.append((base, end))
                else:
                    out.append(batch)  # joined once by the caller: one copy of the batch bytes
                covered = end
                if end >= last:
                    break
            offset = covered + 1
    return out, aborted


def _without(runs: list[tuple[int, int, int]], ranges: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """The (first, last, delivery count) runs less the offsets in `ranges`."""
    for lo, hi in ranges:
        kept = []
        for first, last, count in runs:
            if last < lo or first > hi:
                kept.append((first, last, count))
                continue
            if first < lo:
                kept.append((first, lo - 1, count))
            if last > hi:
                kept.append((hi + 1, last, count))
        runs = kept
    return runs


async def handle_share_fetch(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response[version]
    Topic = cls.ShareFetchableTopicResponse
    Partition = Topic.PartitionData
    share = broker.share
    group_id, member = body.group_id or "", body.member_id or ""
    lock_ms = int(share.config(group_id, "share.record.lock.duration.ms")) if group_id else 0

    def answer(error: int, message: str | None = None, parts=None) -> object:
        topics = {}
        for (topic_id, index), fields in sorted((parts or {}).items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            topics.setdefault(topic_id, []).append(Partition(
                partition_index=index, error_code=fields.get("error", 0), error_message=None,
                acknowledge_error_code=fields.get("ack", 0), acknowledge_error_message=None,
                current_leader=Partition.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                records=fields.get("records", b""), acquired_records=[
                    Partition.AcquiredRecords(first_offset=f, last_offset=l, delivery_count=c)
                    for f, l, c in fields.get("acquired", ())]))
        return cls(throttle_time_ms=0, error_code=error, error_message=message, acquisition_lock_timeout_ms=lock_ms,
                   responses=[Topic(topic_id=t, partitions=ps) for t, ps in topics.items()], node_endpoints=[])

    if not group_id:
        return answer(ErrorCode.INVALID_REQUEST, "GroupId must be set.")
    if not broker.allowed(Op.READ, Res.GROUP, group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    share.load()
    names = broker.topic_names_by_id()
    ids = {name: topic_id for topic_id, name in names.items()}
    refused = {n for n in {names.get(t.topic_id) for t in body.topics} if n and not broker.allowed(Op.READ, Res.TOPIC, n)}
    wanted = [(names[t.topic_id], p.partition_index) for t in body.topics if t.topic_id in names
              for p in t.partitions]
    forgotten = [(names[t.topic_id], p) for t in body.forgotten_topics_data if t.topic_id in names for p in t.partitions]
    try:
        session = share.session(group_id, member, body.share_session_epoch, wanted, forgotten)
    except SessionError as exc:
        return answer(exc.code, str(exc))
    acks, changed = _acknowledge(broker, body, names, member, refused)
    parts: dict = {}
    for key, error in acks.items():
        parts.setdefault(key, {})["ack"] = error
    for t in body.topics:  # partitions named by an id this broker does not know
        if t.topic_id not in names:
            for p in t.partitions:
                parts.setdefault((t.topic_id, p.partition_index), {})["error"] = ErrorCode.UNKNOWN_TOPIC_ID
    renewing = version >= 2 and body.is_renew_ack  # a request that renews locks fetches nothing (KIP-1222)
    if session is not None and not renewing:
        isolation = share.config(group_id, "share.isolation.level")
        committed = isolation == READ_COMMITTED
        # membership is not checked here: Kafka 4.4's share-partition leaders serve any member id
        fetchable = sorted(session.partitions)
        if body.share_session_epoch == 0:
            for topic, p in fetchable:
                parts.setdefault((ids[topic], p), {})
        deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
        max_records = body.max_records if version >= 1 and body.max_records > 0 else 500
        while True:
            got = _acquire(broker, group_id, member, fetchable, refused, ids, parts, max_records, committed)
            if got or trio.current_time() >= deadline or not fetchable:
                break
            event = trio.Event()
            released = share.available
            keys = [(t, p) for t, p in fetchable]
            broker.appends.register(keys, event)
            try:
                with trio.move_on_at(deadline):
                    async with trio.open_nursery() as nursery:
                        async def either(wait) -> None:
                            await wait()
                            nursery.cancel_scope.cancel()
                        nursery.start_soon(either, event.wait)
                        nursery.start_soon(either, released.wait)
            finally:
                broker.appends.unregister(keys, event)
    error = await _durable(broker, changed)
    if error:
        for key in acks:
            parts[key]["ack"] = error
    else:
        await share.flush_dead(changed)
    return answer(ErrorCode.NONE, None, parts)


def _acquire(broker: Broker, group_id: str, member: str, fetchable, refused, ids, parts, max_records: int,
             committed: bool) -> int:
    """Acquire and read records of the session's partitions, up to max_records in all; how many."""
    got = 0
    for topic, p in fetchable:
        key = (ids.get(topic), p)
        if key[0] is None:
            continue
        if topic in refused:
            parts.setdefault(key, {})["error"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        if not broker.topology.leads(topic, p):
            parts.setdefault(key, {})["error"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        if got >= max_records:
            continue
        store = broker.store
        try:
            end = store.last_stable_offset(topic, p) if committed else store.high_watermark(topic, p)
            while True:  # again while all it acquired was of aborted transactions
                runs = broker.share.acquire(group_id, member, topic, p, max_records - got, end, broker.share_offsets)
                if not runs:
                    break
                batches, aborted = _read_acquired(broker, topic, p, runs, committed)
                for first, last in aborted:  # a read_committed group never gets these: archived at once
                    broker.share.archive_aborted(group_id, member, topic, p, first, last)
                runs = _without(runs, aborted)
                if runs or not aborted:
                    break
            if not runs:
                continue
            records = b"".join(batches)
        except (UnknownTopic, UnknownPartition):
            parts.setdefault(key, {})["error"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        except (OffsetOutOfRange, CorruptData):
            parts.setdefault(key, {})["error"] = ErrorCode.CORRUPT_MESSAGE
            continue
        fields = parts.setdefault(key, {})
        fields["records"] = records
        fields["acquired"] = runs
        got += sum(last - first + 1 for first, last, _ in runs)
    return got


async def handle_share_acknowledge(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response[version]
    Topic = cls.ShareAcknowledgeTopicResponse
    Partition = Topic.PartitionData
    share = broker.share
    group_id, member = body.group_id or "", body.member_id or ""
    lock_ms = int(share.config(group_id, "share.record.lock.duration.ms")) if group_id else 0

    def answer(error: int, message: str | None = None, results=None) -> object:
        topics = {}
        for (topic_id, index), code in (results or {}).items():
            topics.setdefault(topic_id, []).append(Partition(
                partition_index=index, error_code=code, error_message=None,
                current_leader=Partition.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))
        return cls(throttle_time_ms=0, error_code=error, error_message=message, acquisition_lock_timeout_ms=lock_ms,
                   responses=[Topic(topic_id=t, partitions=ps) for t, ps in topics.items()], node_endpoints=[])

    if not group_id:
        return answer(ErrorCode.INVALID_REQUEST, "GroupId must be set.")
    if not broker.allowed(Op.READ, Res.GROUP, group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    share.load()
    names = broker.topic_names_by_id()
    refused = {n for n in {names.get(t.topic_id) for t in body.topics} if n and not broker.allowed(Op.READ, Res.TOPIC, n)}
    try:
        share.session(group_id, member, body.share_session_epoch, [], [], acknowledge_only=True)
    except SessionError as exc:
        return answer(exc.code, str(exc))
    results, changed = _acknowledge(broker, body, names, member, refused)
    error = await _durable(broker, changed)
    if error:
        results = {key: error for key in results}
    else:
        await share.flush_dead(changed)
    return answer(ErrorCode.NONE, None, results)


def _lag(broker: Broker, topic: str, partition: int, part) -> int:
    """Records of the partition the group has still to deliver and have acknowledged: from the
    share-partition's start to the high watermark, less those in its window already done."""
    high_watermark = broker.store.high_watermark(topic, partition)
    return max(0, high_watermark - part.start - part.done())


async def handle_describe_share_group_offsets(broker: Broker, request: Request):
    """DescribeShareGroupOffsets (90): each share-partition's start offset (and, v1, its lag)."""
    version = request.header.api_version
    cls = request.spec.response[version]
    Group = cls.DescribeShareGroupOffsetsResponseGroup
    Topic = Group.DescribeShareGroupOffsetsResponseTopic
    Partition = Topic.DescribeShareGroupOffsetsResponsePartition
    topics_now = broker.store.topics()
    groups = []
    for g in request.body.groups:
        def failed(code: int, message: str | None = None) -> object:
            return Group(group_id=g.group_id, topics=[], error_code=code, error_message=message)
        if not broker.allowed(Op.DESCRIBE, Res.GROUP, g.group_id):
            groups.append(failed(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not broker.coordinates(g.group_id):
            groups.append(failed(ErrorCode.NOT_COORDINATOR))
            continue
        if g.group_id not in broker.share.known_groups():
            groups.append(failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {g.group_id} not found."))
            continue
        parts = broker.share.group_partitions(g.group_id)
        wanted = ({(t.topic_name, p) for t in g.topics for p in t.partitions} if g.topics is not None
                  else set(parts))
        by_topic: dict[str, list] = {}
        for topic, p in sorted(wanted):
            part = parts.get((topic, p))
            if topic not in topics_now or not broker.allowed(Op.DESCRIBE, Res.TOPIC, topic):
                continue
            by_topic.setdefault(topic, []).append(Partition(
                partition_index=p, start_offset=part.start if part is not None else -1, leader_epoch=0,
                lag=_lag(broker, topic, p, part) if part is not None else -1, error_code=0, error_message=None))
        groups.append(Group(group_id=g.group_id, topics=[
            Topic(topic_name=t, topic_id=topics_now[t].topic_id, partitions=ps) for t, ps in by_topic.items()],
            error_code=0, error_message=None))
    return cls(throttle_time_ms=0, groups=groups)


async def handle_alter_share_group_offsets(broker: Broker, request: Request):
    """AlterShareGroupOffsets (91): an empty share group starts the partitions at new offsets."""
    body = request.body
    cls = request.spec.response[request.header.api_version]
    Topic = cls.AlterShareGroupOffsetsResponseTopic
    Partition = Topic.AlterShareGroupOffsetsResponsePartition
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return cls(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                   responses=[])
    if not broker.coordinates(body.group_id):
        return cls(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR, error_message=None, responses=[])
    group = broker.share.describe(body.group_id)
    if group is not None and group.members:
        return cls(throttle_time_ms=0, error_code=ErrorCode.NON_EMPTY_GROUP,
                   error_message="The group is not empty.", responses=[])
    topics_now = broker.store.topics()
    responses = []
    for t in body.topics:
        meta = topics_now.get(t.topic_name)
        results = []
        for p in t.partitions:
            if meta is None or not 0 <= p.partition_index < meta.partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
            elif not broker.allowed(Op.READ, Res.TOPIC, t.topic_name):
                code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
            elif p.start_offset < -1:
                code, message = ErrorCode.INVALID_REQUEST, f"Invalid start offset {p.start_offset}."
            else:
                offset = p.start_offset
                if offset == -1:  # -1: the partition's end, as kafka-share-groups --to-latest sends
                    offset = broker.store.high_watermark(t.topic_name, p.partition_index)
                code = await broker.share.reset(body.group_id, t.topic_name, p.partition_index, offset)
                message = None
            results.append(Partition(partition_index=p.partition_index, error_code=code, error_message=message))
        responses.append(Topic(topic_name=t.topic_name, topic_id=meta.topic_id if meta else uuid.UUID(int=0),
                               partitions=results))
    return cls(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)


async def handle_delete_share_group_offsets(broker: Broker, request: Request):
    """DeleteShareGroupOffsets (92): an empty share group forgets its state of whole topics."""
    body = request.body
    cls = request.spec.response[request.header.api_version]
    Topic = cls.DeleteShareGroupOffsetsResponseTopic
    if not broker.allowed(Op.DELETE, Res.GROUP, body.group_id):
        return cls(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                   responses=[])
    if not broker.coordinates(body.group_id):
        return cls(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR, error_message=None, responses=[])
    if body.group_id not in broker.share.known_groups():
        return cls(throttle_time_ms=0, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                   error_message=f"Group {body.group_id} not found.", responses=[])
    group = broker.share.describe(body.group_id)
    if group is not None and group.members:
        return cls(throttle_time_ms=0, error_code=ErrorCode.NON_EMPTY_GROUP,
                   error_message="The group is not empty.", responses=[])
    topics_now = broker.store.topics()
    responses = []
    for t in body.topics:
        meta = topics_now.get(t.topic_name)
        if meta is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not broker.allowed(Op.READ, Res.TOPIC, t.topic_name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            code = await broker.share.forget_topic(body.group_id, t.topic_name)
        responses.append(Topic(topic_name=t.topic_name, topic_id=meta.topic_id if meta else uuid.UUID(int=0),
                               error_code=code, error_message=None))
    return cls(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)
