"""ListOffsets and OffsetForLeaderEpoch: where a partition's offsets are, by time and by leader
epoch (Kafka's handleListOffsetRequest and handleOffsetForLeaderEpochRequest)."""

from __future__ import annotations

import time

from broker.broker import Broker
from broker.handlers.fetch import READ_COMMITTED, epoch_error
from broker.security.acl import Op, Res
from broker.views.definition import data_topic, view_of
from protocol.codec import Request
from protocol.errors import ErrorCode

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


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
