"""ProduceRequest v3-v11 body decoder, written by hand.

kafka-python's generated decoder builds a DataContainer per topic and partition and copies
every record batch into new bytes; with many partitions per request (1,000 and more: the
MetaQ many-queues case) that walk was the largest per-partition cost on the produce path.
This decoder returns small named tuples with the same attribute names, and each
partition's records as a memoryview over the request frame, so a batch is copied once,
into the commitlog. Versions 0-2 (refused by the handler) still go through kafka-python.
protocol/_produce_request.c is this walk's twin in C, used when built (57 us for 100 partitions in
Python); tests/protocol/test_produce_request_c.py checks that both give the same on the same bytes.

The layout is Kafka's ProduceRequest.json (flexible from v9);
tests/protocol/test_produce_request.py checks it against kafka-python's encoder.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MIN_VERSION, MAX_VERSION = 3, 11
FLEXIBLE_FROM = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


class DecodeError(ValueError):
    """The body is truncated or inconsistent."""


class PartitionData(NamedTuple):
    index: int
    records: memoryview | None


class TopicData(NamedTuple):
    name: str
    partition_data: list[PartitionData]


class ProduceRequestBody(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicData]


try:  # the C twin of _decode, built by the project's setup (setup.py); no C compiler at setup → the Python walk
    from protocol import _produce_request
except ImportError:
    _c_decode = None
else:
    _produce_request.set_classes(DecodeError, ProduceRequestBody, TopicData, PartitionData)
    _c_decode = _produce_request.decode


def decode_produce_request(body: memoryview, version: int) -> ProduceRequestBody:
    """Decode the body (the bytes after the request header); raises DecodeError."""
    if _c_decode is not None:
        return _c_decode(body, version)
    return _decode(body, version)


def _decode(body: memoryview, version: int) -> ProduceRequestBody:
    """The Python walk, decode_produce_request without the C decoder."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"ProduceRequest v{version} is not decoded here")
    try:
        return _flexible(body) if version >= FLEXIBLE_FROM else _fixed(body)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"truncated or malformed ProduceRequest v{version}: {exc!r}") from None


# Both walks are written out, one function each, with the fields read inline: a reader object
# with a method per field cost 4.2 us for a one-partition request, about a tenth of it.
# The tuples are made with tuple.__new__, a C call (a NamedTuple's own __new__ is Python).
_new = tuple.__new__
_I32_I32 = struct.Struct(">ii")  # a partition's index, then its records' length (v3-v8)


def _fixed(buf: memoryview) -> ProduceRequestBody:
    """Produce v3-v8: int16-prefixed strings, int32-prefixed arrays and bytes."""
    end = len(buf)
    (n,) = _I16.unpack_from(buf, 0)
    pos = 2
    transactional_id = None
    if n >= 0:
        transactional_id = str(_take(buf, pos, n, end), "utf-8")
        pos += n
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    (count,) = _I32.unpack_from(buf, pos)
    pos += 4
    _check_count(count, end - pos)
    topics = []
    for _ in range(count):
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n < 0:
            raise DecodeError("null where a string is required")
        name = str(_take(buf, pos, n, end), "utf-8")
        pos += n
        (parts,) = _I32.unpack_from(buf, pos)
        pos += 4
        _check_count(parts, end - pos)
        partitions = []
        for _ in range(parts):
            index, n = _I32_I32.unpack_from(buf, pos)
            pos += 8
            records = None
            if n >= 0:
                records = _take(buf, pos, n, end)
                pos += n
            partitions.append(_new(PartitionData, (index, records)))
        topics.append(_new(TopicData, (name, partitions)))
    return _new(ProduceRequestBody, (transactional_id, acks, timeout_ms, topics))


def _flexible(buf: memoryview) -> ProduceRequestBody:
    """Produce v9+: compact (uvarint n+1) strings, arrays and bytes, and tagged fields. A
    uvarint below 128 is one byte, read inline; empty tagged fields (one zero byte) are skipped
    inline."""
    end = len(buf)
    n = buf[0]
    pos = 1
    if n >= 0x80:
        n, pos = _uvarint(buf, 0)
    transactional_id = None
    if n > 0:
        n -= 1
        transactional_id = str(_take(buf, pos, n, end), "utf-8")
        pos += n
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    count, pos = _uvarint(buf, pos)
    count -= 1
    _check_count(count, end - pos)
    topics = []
    for _ in range(count):
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = _uvarint(buf, pos)
        if n == 0:
            raise DecodeError("null where a string is required")
        n -= 1
        if n > end - pos:
            raise DecodeError(f"a field of {n} bytes runs past the end of the request")
        name = str(buf[pos:pos + n], "utf-8")
        pos += n
        parts = buf[pos]
        if parts < 0x80:
            pos += 1
        else:
            parts, pos = _uvarint(buf, pos)
        parts -= 1
        if parts < 0 or parts > end - pos:
            _check_count(parts, end - pos)
        partitions = []
        for _ in range(parts):
            (index,) = _I32.unpack_from(buf, pos)
            n = buf[pos + 4]  # the records' length
            if n < 0x80:
                pos += 5
            else:
                n, pos = _uvarint(buf, pos + 4)
            records = None
            if n > 0:
                n -= 1
                if n > end - pos:
                    raise DecodeError(f"a field of {n} bytes runs past the end of the request")
                records = buf[pos:pos + n]
                pos += n
            if buf[pos]:
                pos = _skip_tags(buf, pos, end)
            else:
                pos += 1
            partitions.append(_new(PartitionData, (index, records)))
        if buf[pos]:
            pos = _skip_tags(buf, pos, end)
        else:
            pos += 1
        topics.append(_new(TopicData, (name, partitions)))
    if buf[pos]:
        _skip_tags(buf, pos, end)
    return _new(ProduceRequestBody, (transactional_id, acks, timeout_ms, topics))


def _take(buf: memoryview, pos: int, n: int, end: int) -> memoryview:
    if n > end - pos:
        raise DecodeError(f"a field of {n} bytes runs past the end of the request")
    return buf[pos:pos + n]


def _check_count(n: int, left: int) -> None:
    if n < 0:
        raise DecodeError("null where an array is required")
    if n > left:  # every element takes at least a byte: never allocate for a lie
        raise DecodeError(f"array of {n} elements in {left} bytes")


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it)."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def _skip_tags(buf: memoryview, pos: int, end: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)  # tag
        size, pos = _uvarint(buf, pos)
        _take(buf, pos, size, end)
        pos += size
    return pos


def locate_records(body: memoryview, version: int) -> tuple[int, int, int] | None:
    """For a request of one topic and one partition: (where its records' length field starts,
    where its records start, their length), positions in `body`, which may hold only the start
    of the request. None when the request names more or fewer, its records are null, or `body`
    ends before the records start. The connection uses it to receive a large batch into a pipe
    instead of a buffer (broker/net/splice.py); the request is decoded as above all the same."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    try:
        return _locate_flexible(body) if version >= FLEXIBLE_FROM else _locate_fixed(body)
    except (struct.error, IndexError, DecodeError):
        return None


def _locate_fixed(buf: memoryview) -> tuple[int, int, int] | None:
    (n,) = _I16.unpack_from(buf, 0)
    pos = 2 + max(n, 0) + 6  # transactional id, acks, timeout
    (count,) = _I32.unpack_from(buf, pos)
    if count != 1:
        return None
    (n,) = _I16.unpack_from(buf, pos + 4)
    pos += 6 + max(n, 0)  # the topic's name
    (parts,) = _I32.unpack_from(buf, pos)
    if parts != 1:
        return None
    _, n = _I32_I32.unpack_from(buf, pos + 4)  # the partition's index, its records' length
    at = pos + 12
    if n < 0 or at > len(buf):
        return None
    return at - 4, at, n


def _locate_flexible(buf: memoryview) -> tuple[int, int, int] | None:
    n, pos = _uvarint(buf, 0)
    pos += max(n - 1, 0) + 6  # transactional id, acks, timeout
    count, pos = _uvarint(buf, pos)
    if count != 2:  # one topic (compact arrays count n + 1)
        return None
    n, pos = _uvarint(buf, pos)
    pos += max(n - 1, 0)  # the topic's name
    parts, pos = _uvarint(buf, pos)
    if parts != 2:
        return None
    length_at = pos + 4
    n, at = _uvarint(buf, length_at)
    if n == 0 or at > len(buf):
        return None
    return length_at, at, n - 1


def records_length_field(version: int, n: int) -> bytes:
    """The encoded length of records of `n` bytes, as the layout of `version` writes it."""
    if version < FLEXIBLE_FROM:
        return _I32.pack(n)
    out = bytearray()
    n += 1
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
