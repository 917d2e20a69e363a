"""ProduceRequest v3-v11 body decoder, written by hand.

kafka-python's generated decoder builds a DataContainer per topic and partition and copies
every record batch into new bytes; with many partitions per request (1,000 and more: the
MetaQ many-queues case) that walk was the largest per-partition cost on the produce path.
This decoder returns small named tuples with the same attribute names, and each
partition's records as a memoryview over the request frame, so a batch is copied once,
into the commitlog. Versions 0-2 (refused by the handler) still go through kafka-python.

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


def decode_produce_request(body: memoryview, version: int) -> ProduceRequestBody:
    """Decode the body (the bytes after the request header); raises DecodeError."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"ProduceRequest v{version} is not decoded here")
    try:
        return _Reader(body, version >= FLEXIBLE_FROM).request()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"truncated or malformed ProduceRequest v{version}: {exc!r}") from None


class _Reader:
    __slots__ = ("buf", "end", "flexible", "pos")

    def __init__(self, buf: memoryview, flexible: bool) -> None:
        self.buf = buf
        self.end = len(buf)
        self.flexible = flexible
        self.pos = 0

    def request(self) -> ProduceRequestBody:
        transactional_id = self.string(nullable=True)
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(self.buf, self.pos)
        self.pos += 6
        topics = []
        for _ in range(self.count()):
            name = self.string(nullable=False)
            partitions = []
            for _ in range(self.count()):
                (index,) = _I32.unpack_from(self.buf, self.pos)
                self.pos += 4
                partitions.append(PartitionData(index, self.records()))
                self.tags()
            topics.append(TopicData(name, partitions))
            self.tags()
        self.tags()
        return ProduceRequestBody(transactional_id, acks, timeout_ms, topics)

    def uvarint(self) -> int:
        value = shift = 0
        buf, pos = self.buf, self.pos
        while True:
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 28:
                raise DecodeError("unsigned varint longer than 5 bytes")

    def length(self, width: struct.Struct) -> int:
        """A length prefix: compact (uvarint, n+1) when flexible, else fixed width; -1 is null."""
        if self.flexible:
            return self.uvarint() - 1
        (n,) = width.unpack_from(self.buf, self.pos)
        self.pos += width.size
        return n

    def take(self, n: int) -> memoryview:
        if n > self.end - self.pos:
            raise DecodeError(f"a field of {n} bytes runs past the end of the request")
        start = self.pos
        self.pos += n
        return self.buf[start:self.pos]

    def string(self, nullable: bool) -> str | None:
        n = self.length(_I16)
        if n < 0:
            if nullable:
                return None
            raise DecodeError("null where a string is required")
        return str(self.take(n), "utf-8")

    def count(self) -> int:
        n = self.length(_I32)
        if n < 0:
            raise DecodeError("null where an array is required")
        if n > self.end - self.pos:  # every element takes at least a byte: never allocate for a lie
            raise DecodeError(f"array of {n} elements in {self.end - self.pos} bytes")
        return n

    def records(self) -> memoryview | None:
        n = self.length(_I32)
        return None if n < 0 else self.take(n)

    def tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())
