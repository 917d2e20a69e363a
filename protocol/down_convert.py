"""Stored RecordBatch v2 down-converted to message sets for Fetch v0-v3.

Consumers this old read message format v0 (Fetch v0-v1) or v1 (Fetch v2-v3); Kafka 3.9
stores v2 only and converts what it returns to them (RecordsUtil.downConvert), batch by
batch, as here:
- control batches are skipped; a zstd batch cannot be converted: conversion stops before
  it, and when it comes first the partition answers UNSUPPORTED_COMPRESSION_TYPE;
- an uncompressed batch becomes one message per record from the fetch offset on;
- a compressed batch becomes one wrapper message of the same codec holding all its records
  (the consumer skips those below its offset); the wrapper has the last record's offset and
  (magic 1) the batch's largest timestamp; magic 1 inner offsets count from the first record;
- magic 1 keeps each record's timestamp, except in a LogAppendTime batch, where every
  message carries the append time and the timestamp-type bit; magic 0 has no timestamp;
  record headers are dropped (the old formats have none).
kafka-python reads the batches (DefaultRecordBatch) and writes the messages
(LegacyRecordBatchBuilder, kafka.codec). Its builder writes a producer's messages, whose
attributes hold at most a codec, so the wrapper's codec and the timestamp-type bit are set
here afterwards and the CRC-32 recomputed. This is per-record work (5-25 us a record, gzip
the slowest) that only consumers of Fetch v0-v3 cause, run by the fetch handler in a worker
thread; Fetch v4+ sends the stored batches untouched. Sans-IO.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from kafka import codec
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from protocol.record_batch import CODEC_MASK, CODEC_ZSTD, CONTROL_BIT, HEADER, TIMESTAMP_TYPE_BIT

LAST_VERSION = 3  # Fetch v4+ returns RecordBatch v2
_SIZE = struct.Struct(">i")
_CRC = struct.Struct(">I")
_SIZE_AT, _CRC_AT, _MAGIC_AT, _ATTRIBUTES_AT = 8, 12, 16, 17
_UNLIMITED = 1 << 62  # no set built here is cut by the builder's own size limit
_COMPRESS = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode}


def magic_for(fetch_version: int) -> int:
    """The message format a Fetch version reads."""
    return 0 if fetch_version <= 1 else 1


def down_convert(batches: Sequence[bytes | memoryview], magic: int, fetch_offset: int,
                 max_bytes: int) -> list[bytes] | None:
    """The batches as message sets, one per batch with records to send, at most `max_bytes`
    of them except the first; None when the first batch to convert is zstd-compressed."""
    out: list[bytes] = []
    size = 0
    for batch in batches:
        attributes = HEADER.unpack_from(batch)[5]
        if attributes & CONTROL_BIT:
            continue
        kind = attributes & CODEC_MASK
        if kind == CODEC_ZSTD:
            return out or None  # the consumer comes back for it and gets the error
        converted = _message_set(DefaultRecordBatch(bytes(batch)), magic, kind, fetch_offset)
        if converted is None:
            continue
        if out and size + len(converted) > max_bytes:
            break
        out.append(converted)
        size += len(converted)
    return out


def _message_set(batch: DefaultRecordBatch, magic: int, kind: int, fetch_offset: int) -> bytes | None:
    """One batch's records as a message set (None when none is left to send)."""
    log_append_time = batch.timestamp_type == DefaultRecordBatch.LOG_APPEND_TIME
    type_bit = TIMESTAMP_TYPE_BIT if log_append_time and magic == 1 else 0
    records = [(r.offset, r.timestamp, r.key, r.value) for r in batch if kind or r.offset >= fetch_offset]
    if not records:
        return None
    if not kind:
        return bytes(_messages(magic, records, type_bit))
    first, last = records[0][0], records[-1][0]
    inner = _messages(magic, [(o - first if magic == 1 else o, t, k, v) for o, t, k, v in records], type_bit)
    if magic == 0 and kind == 3:
        # Kafka before 0.10 computed the LZ4 frame's header checksum over the wrong bytes, and
        # magic 0 readers expect that frame (Kafka writes it so when it converts to magic 0)
        value = codec.lz4_encode_old_kafka(bytes(inner))
    else:
        value = _COMPRESS[kind](bytes(inner))
    # a LogAppendTime record's timestamp is the append time, which is then the largest
    wrapper = _messages(magic, [(last, max(r[1] for r in records), None, value)], 0)
    _set_attributes(wrapper, kind | type_bit)
    return bytes(wrapper)


def _messages(magic: int, records: list[tuple[int, int, bytes | None, bytes | None]], type_bit: int,
              ) -> bytearray:
    builder = LegacyRecordBatchBuilder(magic, 0, _UNLIMITED)
    for offset, timestamp, key, value in records:
        builder.append(offset, timestamp, key, value)
    buf = builder.build()
    if type_bit:
        _set_attributes(buf, type_bit)
    return buf


def _set_attributes(buf: bytearray, attributes: int) -> None:
    """Give every message of the set these attributes, and a CRC-32 that covers them."""
    pos = 0
    while pos < len(buf):
        end = pos + 12 + _SIZE.unpack_from(buf, pos + _SIZE_AT)[0]
        buf[pos + _ATTRIBUTES_AT] = attributes
        _CRC.pack_into(buf, pos + _CRC_AT, zlib.crc32(memoryview(buf)[pos + _MAGIC_AT:end]))
        pos = end
