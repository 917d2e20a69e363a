"""Record-level views of stored batches: tag hashes, key hashes and single-record decoding.

Owns every use of kafka-python's DefaultRecordBatch in the store (it handles all codecs),
and the stable 64-bit hashes (blake2b) used for tags and keys. Never runs for topics that
need no record parsing: callers decide.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from kafka.record.default_records import DefaultRecordBatch

from protocol.rebatch import record_spans, records_area
from protocol.record_batch import HEADER

try:  # built by the project's setup (setup.py); optional, the Python walk is the same
    from store._keywalk import record_keys as _c_walk
except ImportError:
    _c_walk = None


@dataclass(frozen=True, slots=True)
class StoredRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    msg_id: str = ""


def stable_hash(data: bytes) -> int:
    """First 8 bytes of blake2b(data) as a signed little-endian int64, never 0."""
    h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)
    return h or 1


def tag_hash(value: bytes | None) -> int:
    return 0 if value is None else stable_hash(value)


def key_hash(topic: str, key: bytes) -> int:
    """Hash of (topic, key) for the key index; as unsigned 64-bit."""
    return stable_hash(topic.encode() + b"\x00" + key) & 0xFFFFFFFFFFFFFFFF


def decode(batch: bytes | bytearray | memoryview) -> DefaultRecordBatch:
    return DefaultRecordBatch(bytes(batch))


def tag_hashes(batch: bytes | bytearray | memoryview, tag_header: str) -> np.ndarray:
    """Per-record tag hashes of one batch (0 for records without the header)."""
    out = []
    for record in decode(batch):
        value = None
        for name, v in record.headers:
            if name == tag_header:
                value = v
                break
        out.append(tag_hash(value))
    return np.array(out, dtype=np.int64)


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it)."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result, shift = b & 0x7F, 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def record_keys(batch: bytes | bytearray | memoryview) -> list[tuple[int, bytes]]:
    """(offset delta, key) of each record that has a key: what the key dispatcher indexes.

    Walks each record only as far as its key, where kafka-python's iteration builds whole
    record objects (value copy, headers). kafka-python still does the decompression. The walk
    is store/_keywalk.c when the project's setup built it, else `walk_keys`, the same walk in
    Python (tests/store/test_keywalk.py gives both the same batches). Same answer as
    keyed_records (tests/store/test_tags_and_keys.py checks that)."""
    batch_obj = DefaultRecordBatch(bytes(batch))
    batch_obj._maybe_uncompress()  # kafka-python's codecs; its buffer then holds the records
    return _walk(batch_obj._buffer, batch_obj._pos, batch_obj.records_count)


def walk_keys(buf, pos: int, count: int) -> list[tuple[int, bytes]]:
    """(offset delta, key) of the records with a key among `count` records from `pos` in `buf`.
    The timestamp delta is skipped unread and the offset delta read only for a record with a
    key: 0.33 us a keyless 100 B record, 0.63 reading every varint; store/_keywalk.c 0.008."""
    out = []
    for _ in range(count):
        length, pos = _varint(buf, pos)
        end = pos + length
        pos += 1  # attributes
        while buf[pos] & 0x80:  # the timestamp delta, not needed
            pos += 1
        pos += 1
        delta_at = pos  # the offset delta, read below only for a record with a key
        while buf[pos] & 0x80:
            pos += 1
        pos += 1
        if buf[pos] == 1:  # a null key (zigzag -1): keyless producers' every record
            pos = end
            continue
        key_length, pos = _varint(buf, pos)
        if key_length >= 0:
            out.append((_varint(buf, delta_at)[0], bytes(buf[pos:pos + key_length])))
        pos = end
    return out


_walk = _c_walk or walk_keys


class CleanerRecord(NamedTuple):
    offset: int
    key: bytes | None
    tombstone: bool  # a null value
    start: int  # the record, length prefix included, is area[start:end]
    end: int


def cleaner_records(batch: bytes | bytearray | memoryview) -> tuple[bytes, list[CleanerRecord]]:
    """What the log cleaner needs of each record of a batch: offset, key, whether its value is
    null, and where its bytes lie in the (decompressed) records area, which is returned too
    (protocol/rebatch.py copies the kept spans). Reads each record only as far as its value's
    length."""
    fields = HEADER.unpack_from(batch)
    base, attributes, count = fields[0], fields[5], fields[12]
    area = records_area(batch, attributes)
    out = []
    for start, pos, end in record_spans(area, count):
        pos += 1  # attributes
        _, pos = _varint(area, pos)  # timestamp delta
        delta, pos = _varint(area, pos)
        key_length, pos = _varint(area, pos)
        key = None
        if key_length >= 0:
            key = area[pos:pos + key_length]
            pos += key_length
        value_length, _ = _varint(area, pos)
        out.append(CleanerRecord(base + delta, key, value_length < 0, start, end))
    return area, out


def record_offsets(batch: bytes | bytearray | memoryview) -> np.ndarray:
    """The offsets of a batch's records (a relocated batch holds fewer than its span)."""
    return np.fromiter((r.offset for r in cleaner_records(batch)[1]), dtype=np.int64)


def keyed_records(batch: bytes | bytearray | memoryview) -> list[tuple[int, bytes]]:
    """(offset delta, key) of each record that has a key."""
    batch_obj = decode(batch)
    base = batch_obj.base_offset
    return [(r.offset - base, r.key) for r in batch_obj if r.key is not None]
