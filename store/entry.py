"""Commitlog entry layout (format version 1): the self-describing record around one Kafka batch.

Owns the byte layout of an entry and of the end-of-segment blank marker, and their
validation. Never does file I/O; callers hand it buffers (mmap views).

Layout, big-endian (see docs/storage.md):
  0  u32  entry_length      whole entry, this field included
  4  u32  crc               CRC-32C of bytes [8, entry_length)
  8  u8   magic             0xC1 data entry v1 | 0xB1 end-of-segment blank
  9  u8   flags             bit 0: a relocated batch (the log cleaner's copy, RELOCATED); others 0
  10 u16  topic_length      bytes of the UTF-8 topic name at the end of the entry
  12 16s  topic_id          the topic's UUID (incarnation): entries of a deleted topic stay dead
  28 i32  partition
  32 i64  base_offset       logical offset assigned to the batch's first record
  40 i32  record_count
  44 i64  store_timestamp   ms, monotonic within the commitlog
  52 i64  max_timestamp     the batch's maxTimestamp
  60 ...  batch             Kafka RecordBatch v2, baseOffset rewritten, partitionLeaderEpoch 0
  .. ...  topic name
A blank marker is the first 12 bytes only (length = rest of segment, crc 0, magic 0xB1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

FORMAT_VERSION = 1
MAGIC_DATA = 0xC1
MAGIC_BLANK = 0xB1
RELOCATED = 0x01  # flags: the batch keeps the offsets of an older batch it replaces (store/compaction.py)
ENTRY_HEADER = struct.Struct(">IIBBH16siqiqq")
HEADER_SIZE = ENTRY_HEADER.size  # 60
PREFIX = struct.Struct(">IIBBH")
PREFIX_SIZE = PREFIX.size  # 12: the smallest thing that can sit in a segment (a blank marker)
CRC_FROM = 8
MIN_BATCH = 61
BATCH_REWRITE = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
# The header and the batch's rewritten first fields are adjacent (the batch starts at byte 60),
# so the append path writes both with one pack_into: one call fewer per append.
HEADER_AND_REWRITE = struct.Struct(ENTRY_HEADER.format + BATCH_REWRITE.format[1:])
ENTRY_AT_BATCH = HEADER_SIZE  # the batch always starts this many bytes into its entry


@dataclass(slots=True)  # not frozen: a frozen dataclass takes 1.3 us to build against 0.24 us, once per
class EntryHeader:  # entry a follower applies or recovery scans (treat it as read-only all the same)
    position: int  # commitlog position of the entry
    length: int
    topic_id: bytes
    partition: int
    base_offset: int
    record_count: int
    store_timestamp: int
    max_timestamp: int
    topic: str
    flags: int = 0

    @property
    def batch_position(self) -> int:
        return self.position + HEADER_SIZE

    @property
    def batch_size(self) -> int:
        return self.length - HEADER_SIZE - len(self.topic.encode())

    @property
    def end_position(self) -> int:
        return self.position + self.length


def entry_length(batch_size: int, topic_length: int) -> int:
    return HEADER_SIZE + batch_size + topic_length


# The append path's writers, bound once (store/commitlog.py uses them too): (buffer, at, length, crc,
# magic, flags, topic_length, topic_id, partition, base_offset, record_count, store_ts, max_ts, then the
# batch's baseOffset, batchLength and partitionLeaderEpoch); an entry's CRC field, at byte 4
pack_header_and_rewrite = HEADER_AND_REWRITE.pack_into
pack_crc = struct.Struct(">I").pack_into
_crc = crc32c.crc32c


def frame_into(buffer: memoryview, at: int, batch, topic: bytes, topic_id: bytes, partition: int, base_offset: int,
               record_count: int, store_ts: int, max_ts: int, leader_epoch: int, flags: int) -> None:
    """A data entry at `at` in `buffer`: the header, the batch with its baseOffset, batchLength and
    partitionLeaderEpoch set as Kafka's leader sets them, the topic, then the CRC. Its twin in C,
    store/_entry.c, runs instead where the project's setup built it (frame, below); both write the
    same bytes (tests/store/test_entry_c.py)."""
    n = len(batch)
    topic_length = len(topic)
    end = at + HEADER_SIZE + n + topic_length
    buffer[at + HEADER_SIZE:end - topic_length] = batch
    buffer[end - topic_length:end] = topic
    pack_header_and_rewrite(buffer, at, end - at, 0, MAGIC_DATA, flags, topic_length, topic_id, partition,
                            base_offset, record_count, store_ts, max_ts, base_offset, n - 12, leader_epoch)
    pack_crc(buffer, at + 4, _crc(buffer[at + CRC_FROM:end]))


try:
    from store import _entry
except ImportError:  # no C compiler at setup: the entry is framed in Python (frame_into)
    _entry = None
if _entry is not None:
    _entry.init(_crc)
frame = frame_into if _entry is None else _entry.frame_into


def write_blank(view: memoryview, local: int, remaining: int) -> None:
    """Mark the rest of a segment as unused so a scan skips to the next one."""
    if remaining >= PREFIX_SIZE:
        PREFIX.pack_into(view, local, remaining, 0, MAGIC_BLANK, 0, 0)


def crc_of(view: memoryview, local: int, length: int) -> int:
    return crc32c.crc32c(view[local + CRC_FROM:local + length])


class Scan:
    """Outcome of reading one slot of a segment."""

    END = "end"  # zeros: nothing was ever written here
    BLANK = "blank"  # end-of-segment marker: continue in the next segment
    BAD = "bad"  # torn or corrupt: the log ends here


def read_entry(view: memoryview, local: int, segment_start: int) -> EntryHeader | str:
    """Decode and validate the entry at `local`; returns an EntryHeader or a Scan outcome."""
    remaining = len(view) - local
    if remaining < PREFIX_SIZE:
        return Scan.BLANK
    length, crc, magic, _flags, topic_length = PREFIX.unpack_from(view, local)
    if length == 0 and magic == 0:
        return Scan.END
    if magic == MAGIC_BLANK:
        return Scan.BLANK if length == remaining else Scan.BAD
    if magic != MAGIC_DATA or length > remaining or length < HEADER_SIZE + MIN_BATCH + topic_length:
        return Scan.BAD
    if crc_of(view, local, length) != crc:
        return Scan.BAD
    fields = ENTRY_HEADER.unpack_from(view, local)
    topic = bytes(view[local + length - topic_length:local + length]).decode()
    return EntryHeader(segment_start + local, length, fields[5], fields[6], fields[7], fields[8],
                       fields[9], fields[10], topic, fields[3])
