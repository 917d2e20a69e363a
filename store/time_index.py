"""Timestamp lookups over one queue: Kafka's ListOffsets by time and max-timestamp.

Owns the per-queue running maximum of batch maxTimestamp (in memory, built lazily from
the consume queue and commitlog, one entry each time the maximum rises, like Kafka's time
index), the O(log N) search over it, and the scan inside the one batch it selects.
Never writes files.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

from protocol.record_batch import MAX_TIMESTAMP_OFFSET, parse_header
from store.commitlog import CommitLog
from store.consume_queue import ConsumeQueue
from store.records import decode

_MAX_TS = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")
_BASE = struct.Struct(">q")
NO_MATCH = (-1, -1)


class TimeIndex:
    """(running max timestamp, base offset of the batch that raised it), both ascending."""

    __slots__ = ("covered", "maxes", "offsets")

    def __init__(self, start: int) -> None:
        self.maxes = array("q")
        self.offsets = array("q")
        self.covered = start  # offsets below this are indexed

    def note(self, base_offset: int, max_timestamp: int, next_offset: int) -> None:
        if not self.maxes or max_timestamp > self.maxes[-1]:
            self.maxes.append(max_timestamp)
            self.offsets.append(base_offset)
        self.covered = next_offset

    def extend(self, queue: ConsumeQueue, log: CommitLog, stop: int) -> None:
        """Index the batches of offsets [covered, stop)."""
        offset = self.covered
        while offset < stop:
            offset = queue.next_live(offset, stop)  # a compacted queue's gaps
            if offset >= stop:
                break
            pos, size = queue.entry(offset)
            view = log.view(pos, size) if size > 0 else None  # < 0: corrupt, not indexed
            if view is None:
                offset += 1
                continue
            # a batch the log cleaner re-encoded starts before `offset` (its first records went)
            last = max(offset + 1, _BASE.unpack_from(view, 0)[0] + _LAST_DELTA.unpack_from(view, 23)[0] + 1)
            self.note(offset, _MAX_TS.unpack_from(view, MAX_TIMESTAMP_OFFSET)[0], last)
            offset = last
        self.covered = max(self.covered, stop)


def offset_for_timestamp(index: TimeIndex, queue: ConsumeQueue, log: CommitLog,
                         ts: int) -> tuple[int, int]:
    """Smallest offset whose record timestamp >= ts, and that timestamp; (-1, -1) if none."""
    i = bisect_left(index.maxes, ts)
    if i == len(index.maxes):
        return NO_MATCH
    base = index.offsets[i]
    view = _batch(queue, log, base)
    if view is None:
        return NO_MATCH
    header = parse_header(view)
    whole = header.base_offset == base  # else a batch the log cleaner re-encoded: skip to `base`
    if header.is_log_append_time:
        return base, header.max_timestamp
    if whole and header.base_timestamp >= ts:
        return base, header.base_timestamp
    for record in decode(view):
        if record.offset >= base and record.timestamp >= ts:
            return record.offset, record.timestamp
    return NO_MATCH


def max_timestamp_offset(index: TimeIndex, queue: ConsumeQueue, log: CommitLog) -> tuple[int, int]:
    """Offset and timestamp of the first record carrying the largest timestamp."""
    if not index.maxes:
        return NO_MATCH
    base, top = index.offsets[-1], index.maxes[-1]
    view = _batch(queue, log, base)
    if view is None:
        return NO_MATCH
    if parse_header(view).is_log_append_time:
        return base, top
    for record in decode(view):
        if record.timestamp == top:
            return record.offset, record.timestamp
    return base, top


def _batch(queue: ConsumeQueue, log: CommitLog, offset: int) -> memoryview | None:
    pos, size = queue.entry(offset)
    return log.view(pos, size) if size > 0 else None
