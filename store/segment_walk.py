"""Walking one commitlog segment entry by entry, telling a torn tail from mid-log corruption.

Owns validating each entry (length, magic, CRC-32C), resynchronising after an invalid one
(its own length if the entry there validates, else a forward search for the next entry or
blank marker that validates), and reading what a damaged entry claims to be. Never writes
to a segment: truncating a torn tail is the commitlog's, marking offsets the recovery's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
import numpy as np

from store import entry as E
from store.segment import Segment

_DATA_MARK = bytes([E.MAGIC_DATA, 0])  # magic + flags of a data entry, 8 bytes into it
_RELOCATED_MARK = bytes([E.MAGIC_DATA, E.RELOCATED])  # ... of a relocated batch (the log cleaner's)
_BLANK_MARK = bytes([E.MAGIC_BLANK, 0, 0, 0])  # magic, flags, topic_length of a blank marker
_BATCH_CHECK = struct.Struct(">qi4xb6xi")  # baseOffset, batchLength, magic @16, lastOffsetDelta @23
_RECORDS_COUNT = struct.Struct(">i")  # @57
_ZERO_CHUNK = 1 << 20


class Ending:
    """How the valid entries of a segment end."""

    BLANK = "blank"  # end-of-segment marker (or < 12 bytes left): the next segment follows
    END = "end"  # zeros up to the limit: nothing was written after this
    TORN = "torn"  # invalid bytes with nothing valid after them, up to the limit


@dataclass(frozen=True, slots=True)
class Tail:
    kind: str  # an Ending
    local: int  # offset in the segment where the valid entries stop


@dataclass(frozen=True, slots=True)
class CorruptRegion:
    start: int  # commitlog position of the first invalid entry
    end: int  # commitlog position of the next valid entry, blank marker or segment end
    claimed: E.EntryHeader | None  # the damaged entry's header, if it agrees with its batch's header


def walk(seg: Segment, stop: int | None = None, decode: bool = True, start: int = 0
         ) -> Iterator[E.EntryHeader | CorruptRegion | Tail]:
    """Yield each valid entry (only if `decode`) and each corrupt region of `seg` in local
    offsets [start, stop), then one Tail. `start` must be an entry boundary. A region is
    reported only when something valid follows it inside [start, stop); what has nothing
    valid after it is the Tail's to judge."""
    view = seg.view
    stop = seg.size if stop is None else stop
    local = start
    while True:
        if not decode:
            local = _skip_valid(view, local, stop)
        if local >= stop:
            yield Tail(Ending.END if stop < seg.size else Ending.BLANK, local)
            return
        outcome = E.read_entry(view, local, seg.start)
        if isinstance(outcome, E.EntryHeader) and outcome.length <= stop - local:
            if decode:
                yield outcome
            local += outcome.length
            continue
        if outcome == E.Scan.BLANK:
            yield Tail(Ending.BLANK, local)
            return
        if outcome == E.Scan.END and not seg.nonzero(local, min(stop, seg.allocated)):
            yield Tail(Ending.END, local)
            return
        nxt = resync(seg, local, stop)
        if nxt is None:
            yield Tail(Ending.TORN, local)
            return
        yield CorruptRegion(seg.start + local, seg.start + nxt, claimed_header(seg, local, nxt))
        local = nxt


def _skip_valid(view: memoryview, local: int, stop: int) -> int:
    """The verification fast path: step over valid data entries without decoding them."""
    unpack, crc_of, prefix = E.PREFIX.unpack_from, crc32c.crc32c, E.PREFIX_SIZE
    least = E.HEADER_SIZE + E.MIN_BATCH
    while stop - local >= prefix:
        length, crc, magic, _flags, topic_length = unpack(view, local)
        if magic != E.MAGIC_DATA or not least + topic_length <= length <= stop - local \
                or crc_of(view[local + E.CRC_FROM:local + length]) != crc:
            break
        local += length
    return local


def has_nonzero(view: memoryview, local: int, stop: int) -> bool:
    arr = np.frombuffer(view, dtype=np.uint8)
    for at in range(local, stop, _ZERO_CHUNK):
        if arr[at:min(stop, at + _ZERO_CHUNK)].any():
            return True
    return False


def _valid_at(seg: Segment, local: int, stop: int) -> bool:
    """Does a valid entry or a genuine blank marker start at `local`?"""
    if local > stop:
        return False
    if seg.size - local < E.PREFIX_SIZE:
        return not has_nonzero(seg.view, local, seg.size)
    outcome = E.read_entry(seg.view, local, seg.start)
    if isinstance(outcome, E.EntryHeader):
        return outcome.length <= stop - local
    return outcome == E.Scan.BLANK and E.PREFIX.unpack_from(seg.view, local)[2] == E.MAGIC_BLANK


def resync(seg: Segment, local: int, stop: int) -> int | None:
    """Local offset of the first valid entry or blank marker after the invalid bytes at
    `local`, or None when nothing below `stop` validates."""
    view = seg.view
    if stop - local >= E.PREFIX_SIZE:
        length, _crc, magic, _flags, topic_length = E.PREFIX.unpack_from(view, local)
        if magic == E.MAGIC_DATA and E.HEADER_SIZE + E.MIN_BATCH + topic_length <= length <= stop - local \
                and _valid_at(seg, local + length, stop):
            return local + length
    # search for the bytes every entry and blank marker carry 8 bytes in; each hit is checked
    marks = (_DATA_MARK, _RELOCATED_MARK, _BLANK_MARK)
    found = [seg.find(mark, local + 1 + E.CRC_FROM, stop) for mark in marks]
    while max(found) >= 0:
        i = min((at, i) for i, at in enumerate(found) if at >= 0)[1]
        candidate = found[i] - E.CRC_FROM
        found[i] = seg.find(marks[i], found[i] + 1, stop)
        if _valid_at(seg, candidate, stop):
            return candidate
    return None


def claimed_header(seg: Segment, local: int, end: int) -> E.EntryHeader | None:
    """What the damaged entry at `local` says it holds, trusted only when the entry header's
    offset and count agree with the Kafka batch header inside it and it ends at `end`."""
    view = seg.view
    if end - local < E.HEADER_SIZE + E.MIN_BATCH:
        return None
    fields = E.ENTRY_HEADER.unpack_from(view, local)
    length, _crc, magic, flags, topic_length = fields[:5]
    if magic != E.MAGIC_DATA or length != end - local:
        return None
    batch_size = length - E.HEADER_SIZE - topic_length
    if batch_size < E.MIN_BATCH:
        return None
    b = local + E.HEADER_SIZE
    base, batch_length, batch_magic, last_delta = _BATCH_CHECK.unpack_from(view, b)
    count = _RECORDS_COUNT.unpack_from(view, b + 57)[0]
    # a relocated batch (the log cleaner's) holds fewer records than its offsets span
    spanned = count <= last_delta + 1 if flags & E.RELOCATED else count == last_delta + 1
    if (base, batch_length + 12, batch_magic, count) != (fields[7], batch_size, 2, fields[8]) \
            or not spanned or count <= 0 or base < 0:
        return None
    try:
        topic = bytes(view[local + length - topic_length:local + length]).decode()
    except UnicodeDecodeError:
        return None
    return E.EntryHeader(seg.start + local, length, fields[5], fields[6], fields[7], fields[8],
                         fields[9], fields[10], topic, flags)
