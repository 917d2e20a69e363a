"""Message sets of format v0/v1 for tests: well-formed ones from kafka-python's builder, and
ones bent the ways producers and attackers bend them (a wrapper around any bytes, a changed
header field with its CRC-32 made right again), plus a reader that shows every header field
(kafka-python's reader hides the inner messages' own headers)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from kafka import codec
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

T0 = 1_700_000_000_000
RECORDS = [(b"k0", b"v0" * 40), (None, b"v1" * 40), (b"k2", None)]
CORRUPT_MESSAGE, UNKNOWN_SERVER_ERROR, INVALID_RECORD, INVALID_TIMESTAMP = 2, -1, 87, 32
_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes


def message_set(magic: int, records: list[tuple[bytes | None, bytes | None]], codec_id: int = 0,
                ts0: int = T0, offsets: list[int] | None = None) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec_id, 1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(offsets[i] if offsets else i, ts0 + i, key, value)
    return bytes(builder.build())


def compress(codec_id: int, magic: int, data: bytes) -> bytes:
    if codec_id == 1:
        return codec.gzip_encode(data)
    if codec_id == 2:
        return codec.snappy_encode(data)
    return codec.lz4_encode_old_kafka(data) if magic == 0 else codec.lz4_encode(data)


def wrapper(magic: int, codec_id: int, value: bytes | None, offset: int = 0, timestamp: int = T0,
            extra_attributes: int = 0) -> bytes:
    """One message whose attributes say `codec_id` around `value`, whatever `value` holds."""
    raw = LegacyRecordBatchBuilder(magic, 0, 1 << 30)
    raw.append(0, timestamp, None, value)
    return restamped(bytes(raw.build()), attributes=codec_id | extra_attributes, offset=offset)


def restamped(message: bytes, *, attributes: int | None = None, timestamp: int | None = None,
              offset: int | None = None, key_length: int | None = None) -> bytes:
    """The first message with header fields changed and its CRC-32 computed again."""
    buf = bytearray(message)
    if attributes is not None:
        buf[17] = attributes
    if timestamp is not None:
        struct.pack_into(">q", buf, 18, timestamp)
    if offset is not None:
        struct.pack_into(">q", buf, 0, offset)
    if key_length is not None:
        struct.pack_into(">i", buf, 18 if buf[16] == 0 else 26, key_length)
    size = struct.unpack_from(">i", buf, 8)[0]
    struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:12 + size])))
    return bytes(buf)


@dataclass
class Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    crc_ok: bool
    raw: bytes = field(repr=False, default=b"")
    inner: list[Message] = field(default_factory=list)


def read_set(data: bytes) -> list[Message]:
    """Every complete message with its own header fields (a partial one at the end is skipped,
    as consumers skip it); a compressed message's `inner` holds the messages it wraps."""
    out = []
    pos = 0
    while len(data) - pos >= 12:
        offset, size = struct.unpack_from(">qi", data, pos)
        if pos + 12 + size > len(data):
            break
        raw = data[pos:pos + 12 + size]
        _, _, crc, magic, attributes = _HEAD.unpack_from(raw)
        timestamp = struct.unpack_from(">q", raw, 18)[0] if magic == 1 else None
        key_at = 18 if magic == 0 else 26
        key_len = struct.unpack_from(">i", raw, key_at)[0]
        value_at = key_at + 4 + max(key_len, 0)
        value_len = struct.unpack_from(">i", raw, value_at)[0]
        key = None if key_len < 0 else raw[key_at + 4:key_at + 4 + key_len]
        value = None if value_len < 0 else raw[value_at + 4:value_at + 4 + value_len]
        m = Message(offset, magic, attributes, timestamp, key, value, zlib.crc32(raw[16:]) == crc, raw)
        if attributes & 7:
            m.inner = read_set(_inflate(attributes & 7, magic, value))
            m.value = None
        out.append(m)
        pos += 12 + size
    return out


def consumed(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) as kafka-python's consumer reads the set."""
    out = []
    for m in read_set(data):
        for r in LegacyRecordBatch(m.raw, m.magic):
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


def _inflate(codec_id: int, magic: int, value: bytes) -> bytes:
    if codec_id == 1:
        return codec.gzip_decode(value)
    if codec_id == 2:
        return codec.snappy_decode(value)
    return codec.lz4_decode_old_kafka(value) if magic == 0 else codec.lz4_decode(value)


def _flip_last_byte(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


BAD_SETS = {  # name: (records, the error code Kafka 3.9 answers)
    "bad crc": (_flip_last_byte(message_set(1, RECORDS)), CORRUPT_MESSAGE),
    "bad crc inside a wrapper": (wrapper(1, 1, compress(1, 1, _flip_last_byte(message_set(1, RECORDS)))),
                                 CORRUPT_MESSAGE),
    "size below the minimum": (b"\x00" * 8 + (10).to_bytes(4, "big") + bytes(10), CORRUPT_MESSAGE),
    "magic 3": (message_set(1, RECORDS)[:16] + b"\x03" + message_set(1, RECORDS)[17:], CORRUPT_MESSAGE),
    "two wrappers": (message_set(1, RECORDS, 1) * 2, INVALID_RECORD),
    "magic 0 then magic 1": (message_set(0, RECORDS) + message_set(1, RECORDS), INVALID_RECORD),
    "inner magic differs": (wrapper(1, 1, compress(1, 1, message_set(0, RECORDS))), INVALID_RECORD),
    "inner set compressed": (wrapper(1, 1, compress(1, 1, message_set(1, RECORDS, 1))), INVALID_RECORD),
    "wrapper of nothing": (wrapper(1, 1, compress(1, 1, b"")), INVALID_RECORD),
    "wrapper with a null value": (wrapper(1, 1, None), INVALID_RECORD),
    "wrapper offset below its last": (wrapper(1, 1, compress(1, 1, message_set(1, RECORDS, offsets=[5, 6, 7])),
                                              offset=2), INVALID_RECORD),
    "zstd in a v1 wrapper": (wrapper(1, 4, b"xx"), INVALID_RECORD),
    "codec 5": (wrapper(1, 5, b"xx"), UNKNOWN_SERVER_ERROR),
    "gzip that is not gzip": (wrapper(1, 1, b"not gzip at all"), UNKNOWN_SERVER_ERROR),
    "v1 lz4 with the old header checksum": (wrapper(1, 3, compress(3, 0, message_set(1, RECORDS))),
                                            UNKNOWN_SERVER_ERROR),
    "key length past the end": (restamped(message_set(1, RECORDS[:1]), key_length=500),
                                UNKNOWN_SERVER_ERROR),
    "negative key length": (restamped(message_set(1, RECORDS[:1]), key_length=-5), UNKNOWN_SERVER_ERROR),
    "negative timestamp": (restamped(message_set(1, RECORDS[:1]), timestamp=-5), UNKNOWN_SERVER_ERROR),
    "LogAppendTime without a timestamp": (restamped(message_set(1, RECORDS[:1]), attributes=8, timestamp=-1),
                                          INVALID_TIMESTAMP),
}
