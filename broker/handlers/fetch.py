"""Fetch (with long polling), ListOffsets and OffsetForLeaderEpoch.

Fetch returns whole stored batches from the batch containing the fetch
offset; KIP-74 lets the first batch of the response exceed the limits. With
nothing to return, it waits for an append to any requested partition or for
max_wait_ms, whichever comes first. Sessions are not kept: session_id 0.
Fetch v0-v3 answers with the batches down-converted to message format v0/v1
(protocol/down_convert.py); from v4 on the stored bytes go out untouched.
"""

from __future__ import annotations

import struct
import time

import trio

from broker.security.acl import Op, Res
from broker.broker import Broker
from broker.views.fetch import read_view
from broker.views.definition import TAG_HEADER, data_topic, view_of
from protocol import down_convert
from protocol.codec import Request
from protocol.errors import ErrorCode
from protocol.fetch_response import PartitionResult, encode_fetch_response, error_partition
from protocol.record_batch import ATTRIBUTES_OFFSET, CODEC_MASK, CODEC_ZSTD
from store import CorruptData, OffsetOutOfRange, UnknownPartition, UnknownTopic

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1  # isolation_level: read_committed stops at the last stable offset
_BASE = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")
ZSTD_MIN_FETCH_VERSION = 10


def epoch_error(broker: Broker, topic: str, partition: int, current_leader_epoch: int,
                replica_reads: bool = False) -> int:
    """Kafka's check of the leader epoch a client last saw (KIP-320): -1 skips it; an older
    one is FENCED_LEADER_EPOCH (refresh metadata), a newer one UNKNOWN_LEADER_EPOCH (this
    broker has not caught up with it yet). In a cluster, a node that is not the master of the
    partition's broker group answers NOT_LEADER_OR_FOLLOWER: clients read from that master;
    with `replica_reads` (a consumer's Fetch v11 or later: KIP-392) a follower of the group
    answers too, checking the epoch against its group's master epoch."""
    topology = broker.topology
    follower = not topology.leads(topic, partition)
    if follower and not (replica_reads and topology.serves_reads(topic, partition)):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch < 0:
        return ErrorCode.NONE
    epoch = topology.epoch if follower else broker.store.leader_epoch(topic, partition)
    if current_leader_epoch == epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


async def handle_fetch(broker: Broker, request: Request):
    """The answer is a list of buffers (protocol.fetch_response): record batches stay memoryviews
    over the commitlog until the connection writes them with sendmsg."""
    body = request.body
    version = request.header.api_version
    topics_now = broker.store.topics()
    keys = [(data_topic(topics_now, t.topic), p.partition) for t in body.topics for p in t.partitions]
    deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
    refused = frozenset()
    if broker.authorizer is not None:  # Read on each topic; a view is a topic of its own name
        refused = frozenset(t.topic for t in body.topics if not broker.allowed(Op.READ, Res.TOPIC, t.topic))
        keys = [key for key, t in zip(keys, (t for t in body.topics for _ in t.partitions)) if t.topic not in refused]
    while True:
        if version <= down_convert.LAST_VERSION:  # down-conversion is per-record work: off the event loop
            topics, size, has_error = await trio.to_thread.run_sync(_read_all, broker, body, version, refused)
        else:
            topics, size, has_error = _read_all(broker, body, version, refused)
        if size >= body.min_bytes or has_error or not keys or trio.current_time() >= deadline:
            break
        event = trio.Event()
        broker.appends.register(keys, event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            broker.appends.unregister(keys, event)
    return encode_fetch_response(version, topics)


def _preferred_replica(broker: Broker, body, version: int) -> int:
    """KIP-392: the follower a master sends this consumer to (its client.rack, Fetch v11's
    rack_id, is that follower's broker.rack), with replica.selector.class set; -1: read here."""
    if version < 11 or not broker.config["replica.selector.class"]:
        return -1
    return broker.topology.preferred_read_replica(body.rack_id or "")


def _read_all(broker: Broker, body, version: int, refused: frozenset[str] = frozenset()):
    committed = version >= 4 and body.isolation_level == READ_COMMITTED
    preferred = _preferred_replica(broker, body, version)
    remaining = body.max_bytes
    size = 0
    has_error = False
    topics = []
    for topic in body.topics:
        if topic.topic in refused:
            has_error = True
            topics.append((topic.topic, [error_partition(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                         for p in topic.partitions]))
            continue
        meta = broker.topic(topic.topic)
        view = view_of(meta)
        if view is not None:
            meta = broker.topic(view.source)
        parts = []
        for p in topic.partitions:
            if meta is None or not 0 <= p.partition < meta.partitions:
                has_error = True
                parts.append(error_partition(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, aborted=[]))
                continue
            fenced = epoch_error(broker, meta.name, p.partition, getattr(p, "current_leader_epoch", -1),
                                 replica_reads=version >= 11)
            if fenced:
                has_error = True
                parts.append(error_partition(p.partition, fenced))
                continue
            if preferred >= 0 and broker.topology.leads(meta.name, p.partition):
                # Kafka's leader reads nothing then and answers at once, naming the replica
                has_error = True
                store = broker.store
                parts.append(PartitionResult(
                    p.partition, 0, store.high_watermark(meta.name, p.partition),
                    store.last_stable_offset(meta.name, p.partition), store.log_start_offset(meta.name, p.partition),
                    [] if committed else None, preferred, []))
                continue
            if version <= down_convert.LAST_VERSION and broker.topic_config(
                    meta, "message.downconversion.enable") == "false":
                has_error = True  # Kafka's topic switch for consumers of message format v0/v1
                parts.append(_conversion_error(p.partition, ErrorCode.UNSUPPORTED_VERSION))
                continue
            limit = min(p.partition_max_bytes, remaining)
            try:
                if view is None:
                    result = broker.store.read(topic.topic, p.partition, p.fetch_offset, max(limit, 1), committed)
                else:
                    result = read_view(broker.store, view, meta.configs[TAG_HEADER], p.partition,
                                       p.fetch_offset, max(limit, 1))
            except (UnknownTopic, UnknownPartition):  # deleted by another client since the check above
                has_error = True
                parts.append(error_partition(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, aborted=[]))
                continue
            except OffsetOutOfRange:
                has_error = True
                parts.append(error_partition(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE))
                continue
            except CorruptData:
                # damaged at rest (found by the startup CRC check): an error, never garbage;
                # Java consumers raise it to the application, which may seek past the range
                has_error = True
                hw = broker.store.high_watermark(meta.name, p.partition)
                parts.append(error_partition(p.partition, ErrorCode.CORRUPT_MESSAGE, hw,
                                             broker.store.log_start_offset(meta.name, p.partition)))
                continue
            batches = result.batches
            if version <= down_convert.LAST_VERSION:  # per-record work, for these old consumers only
                batches = down_convert.down_convert(batches, down_convert.magic_for(version), p.fetch_offset,
                                                    max(limit, 1))
                if batches is None:
                    has_error = True  # its first batch is zstd, which message format v0/v1 cannot carry
                    parts.append(_conversion_error(p.partition, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
                    continue
            if size and batches and (limit <= 0 or len(batches[0]) > limit):
                batches = []  # KIP-74 exempts only the response's first batch from the limits
            if down_convert.LAST_VERSION < version < ZSTD_MIN_FETCH_VERSION and any(
                    b[ATTRIBUTES_OFFSET + 1] & CODEC_MASK == CODEC_ZSTD for b in batches):
                has_error = True  # a client this old cannot read zstd (Kafka answers the same)
                parts.append(error_partition(p.partition, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
                continue
            nbytes = sum(map(len, batches))
            # a view's empty gap batches move consumers on but are not data for min_bytes
            size += nbytes if view is None else result.matched_bytes
            remaining -= nbytes
            hw = result.high_watermark
            # a view's reads end at its source's last stable offset (broker/views/fetch.py)
            lso = result.high_watermark if view is not None else result.last_stable_offset
            aborted = None  # read_uncommitted: Kafka sends a null list
            if committed:  # the aborted transactions the fetched batches may hold records of (KIP-98)
                end = (_BASE.unpack_from(batches[-1], 0)[0] + _LAST_DELTA.unpack_from(batches[-1], 23)[0] + 1
                       if batches else p.fetch_offset)
                aborted = broker.store.aborted_transactions(meta.name, p.partition, p.fetch_offset, end)
            parts.append(PartitionResult(p.partition, 0, hw, lso, result.log_start_offset, aborted, -1, batches))
        topics.append((topic.topic, parts))
    return topics, size, has_error


def _conversion_error(partition: int, error_code: int) -> PartitionResult:
    """A partition Fetch v0-v3 cannot have: Kafka answers these with a null records field."""
    return error_partition(partition, error_code)._replace(records=None)


async def handle_list_offsets(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    Part = cls.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    seen: dict[tuple[str, int], int] = {}
    for t in body.topics:
        for p in t.partitions:
            seen[(t.name, p.partition_index)] = seen.get((t.name, p.partition_index), 0) + 1
    topics = []
    for t in body.topics:
        view = view_of(broker.topic(t.name))
        name = t.name if view is None else view.source  # a view answers with its source's offsets
        meta = broker.topic(name)
        parts = []
        refused = not broker.allowed(Op.DESCRIBE, Res.TOPIC, t.name)
        for p in t.partitions:
            if refused:
                parts.append(Part(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  timestamp=-1, offset=-1, leader_epoch=-1, old_style_offsets=[]))
                continue
            if version == 0:
                error, old_style = _old_style_offsets(broker, meta, name, p)
                parts.append(Part(partition_index=p.partition_index, error_code=error, old_style_offsets=old_style))
                continue
            error, timestamp, offset = _list_offset(broker, meta, name, p, version,
                                                    seen[(t.name, p.partition_index)] > 1,
                                                    version >= 2 and body.isolation_level == READ_COMMITTED)
            epoch = broker.store.leader_epoch(name, p.partition_index) if error == 0 and offset >= 0 else -1
            parts.append(Part(partition_index=p.partition_index, error_code=error, timestamp=timestamp,
                              offset=offset, leader_epoch=epoch))
        topics.append(cls.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return cls[version](throttle_time_ms=0, topics=topics)


def _list_offset(broker: Broker, meta, topic: str, p, version: int, duplicate: bool,
                 committed: bool = False) -> tuple[int, int, int]:
    if duplicate:
        return ErrorCode.INVALID_REQUEST, -1, -1
    if meta is None or not 0 <= p.partition_index < meta.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    fenced = epoch_error(broker, topic, p.partition_index, getattr(p, "current_leader_epoch", -1))
    if fenced:
        return fenced, -1, -1
    store, ts = broker.store, p.timestamp
    if ts == LATEST:
        if committed:
            return 0, -1, store.last_stable_offset(topic, p.partition_index)
        return 0, -1, store.high_watermark(topic, p.partition_index)
    if ts == EARLIEST:
        return 0, -1, store.log_start_offset(topic, p.partition_index)
    if ts == MAX_TIMESTAMP:
        if version < 7:
            return ErrorCode.UNSUPPORTED_VERSION, -1, -1
        offset, found_ts = store.max_timestamp_offset(topic, p.partition_index)
        return 0, found_ts, offset
    if ts < 0:
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    offset, found_ts = store.offset_for_timestamp(topic, p.partition_index, ts)
    return 0, found_ts, offset


def _old_style_offsets(broker: Broker, meta, topic: str, p) -> tuple[int, list[int]]:
    """ListOffsets v0: up to max_num_offsets segment start offsets, newest first (Kafka's
    legacyFetchOffsetsBefore). A Gregor partition has no segments of its own, so it answers as
    a Kafka partition with one segment, last modified at its latest record timestamp: the
    log start, and the high watermark as the log end when it holds records (time: now)."""
    if meta is None or not 0 <= p.partition_index < meta.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
    store, index = broker.store, p.partition_index
    start, end = store.log_start_offset(topic, index), store.high_watermark(topic, index)
    entries = [start] if end == start else [start, end]  # oldest first
    if p.timestamp == LATEST:
        pick = len(entries)
    elif p.timestamp == EARLIEST:
        pick = 1
    elif p.timestamp >= time.time() * 1000:
        pick = len(entries)
    else:
        pick = 1 if store.max_timestamp_offset(topic, index)[1] <= p.timestamp else 0
    return ErrorCode.NONE, entries[:pick][::-1][:max(p.max_num_offsets, 0)]


async def handle_offset_for_leader_epoch(broker: Broker, request: Request):
    """Where the asked epoch ended, from the partition's epoch history (store/epochs.py; one
    epoch, 0, from creation on a single node: its end is the log end)."""
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    EpochEndOffset = cls.OffsetForLeaderTopicResult.EpochEndOffset
    topics = []
    for t in body.topics:
        name = data_topic(broker.store.topics(), t.topic)
        meta = broker.topic(name)
        refused = not broker.allowed(Op.DESCRIBE, Res.TOPIC, t.topic)
        parts = []
        for p in t.partitions:
            if refused:
                parts.append(EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition,
                                            leader_epoch=-1, end_offset=-1))
            elif meta is None or not 0 <= p.partition < meta.partitions:
                parts.append(EpochEndOffset(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition=p.partition,
                                            leader_epoch=-1, end_offset=-1))
            elif fenced := epoch_error(broker, name, p.partition, getattr(p, "current_leader_epoch", -1)):
                parts.append(EpochEndOffset(error_code=fenced, partition=p.partition, leader_epoch=-1, end_offset=-1))
            else:
                epoch, end = broker.store.end_offset_for_epoch(name, p.partition, p.leader_epoch)
                parts.append(EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(cls.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return cls[version](throttle_time_ms=0, topics=topics)
