"""Record-level views of stored batches: tag hashes, key hashes and single-record decoding.

Owns every use of kafka-python's DefaultRecordBatch in the store (it handles all codecs),
and the stable 64-bit hashes (blake2b) used for tags and keys. Never runs for topics that
need no record parsing: callers decide.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from kafka.record.default_records import DefaultRecordBatch


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
    record objects (value copy, headers): about a third of its cost per record, which is what
    lets indexing keys keep up off the write path. kafka-python still does the decompression.
    Same answer as keyed_records (tests/store/test_tags_and_keys.py checks that)."""
    batch_obj = DefaultRecordBatch(bytes(batch))
    batch_obj._maybe_uncompress()  # kafka-python's codecs; its buffer then holds the records
    buf = batch_obj._buffer
    pos = batch_obj._pos
    out = []
    for _ in range(batch_obj.records_count):
        length, pos = _varint(buf, pos)
        end = pos + length
        pos += 1  # attributes
        _, pos = _varint(buf, pos)  # timestamp delta
        delta, pos = _varint(buf, pos)
        key_length, pos = _varint(buf, pos)
        if key_length >= 0:
            out.append((delta, bytes(buf[pos:pos + key_length])))
        pos = end
    return out


def keyed_records(batch: bytes | bytearray | memoryview) -> list[tuple[int, bytes]]:
    """(offset delta, key) of each record that has a key."""
    batch_obj = decode(batch)
    base = batch_obj.base_offset
    return [(r.offset - base, r.key) for r in batch_obj if r.key is not None]
