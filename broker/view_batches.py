"""Re-encoding stored batches for views: keep only the records whose real tag matches.

Offsets, timestamps and producer fields are kept as Kafka keeps them for a
compacted topic: the batch keeps its baseOffset and lastOffsetDelta (so a
consumer's next fetch starts after the whole original batch), each kept record
keeps its offset delta and timestamp, the producer id, epoch and base sequence
are copied, and the CRC is recomputed. The codec is kept (kafka-python's
builder re-compresses, and sends uncompressed when compression would not
shrink the records). A batch whose every record matches is returned as stored.

`gap_batch` is an empty batch (zero records) spanning offsets with no match, as
compaction leaves behind; it moves consumers past them. Never touches the store.
"""

from __future__ import annotations

from collections.abc import Collection

import crc32c
from kafka import codec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import decode_varint

from protocol.record_batch import (
    CODEC_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)

_DECOMPRESS = {1: codec.gzip_decode, 2: codec.snappy_decode, 3: codec.lz4_decode, 4: codec.zstd_decode}
NO_TIMESTAMP = -1


def _records_area(batch: memoryview, attributes: int) -> bytes:
    body = bytes(batch[HEADER_SIZE:])  # bytes index faster than a memoryview in the record walk
    kind = attributes & CODEC_MASK
    return body if kind == 0 else _DECOMPRESS[kind](body)


def _decode_record(buf, pos: int, end: int):
    """(offset_delta, timestamp_delta, key, value, headers) of the record body buf[pos:end]."""
    pos += 1  # attributes, unused in v2
    ts_delta, pos = decode_varint(buf, pos)
    offset_delta, pos = decode_varint(buf, pos)
    size, pos = decode_varint(buf, pos)
    key = None if size < 0 else bytes(buf[pos:pos + size])
    pos += max(size, 0)
    size, pos = decode_varint(buf, pos)
    value = None if size < 0 else bytes(buf[pos:pos + size])
    pos += max(size, 0)
    count, pos = decode_varint(buf, pos)
    headers = []
    for _ in range(count):
        size, pos = decode_varint(buf, pos)
        name = bytes(buf[pos:pos + size]).decode()
        pos += size
        size, pos = decode_varint(buf, pos)
        headers.append((name, None if size < 0 else bytes(buf[pos:pos + size])))
        pos += max(size, 0)
    if pos != end:
        raise ValueError("record length does not match its fields")
    return offset_delta, ts_delta, key, value, headers


def _tag_of(headers: list[tuple[str, bytes | None]], tag_header: str) -> bytes | None:
    for name, value in headers:
        if name == tag_header:
            return value
    return None


def filter_batch(batch: memoryview, candidates: Collection[int], tag_header: str,
                 tags: Collection[bytes]) -> bytes | memoryview | None:
    """The batch with only the records at `candidates` (record indexes whose tag hash matched)
    whose first `tag_header` header really is one of `tags`; None when no record qualifies."""
    (base_offset, _, _, _, _, attributes, last_delta, first_ts, max_ts, producer_id, producer_epoch,
     base_sequence, count) = HEADER.unpack_from(batch)
    if attributes & CONTROL_BIT:
        return None
    wanted = {int(i) for i in candidates if 0 <= i < count}
    if not wanted:
        return None
    last_wanted = max(wanted)
    buf = _records_area(batch, attributes)
    pos = 0
    kept = []
    for index in range(last_wanted + 1):
        # the record length varint, inlined: this loop runs for every record before the last match
        byte = buf[pos]
        pos += 1
        raw, shift = byte & 0x7F, 7
        while byte & 0x80:
            byte = buf[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            shift += 7
        length = (raw >> 1) ^ -(raw & 1)
        if index in wanted:
            record = _decode_record(buf, pos, pos + length)
            if _tag_of(record[4], tag_header) in tags:
                kept.append(record)
        pos += length
    if not kept:
        return None
    if len(kept) == count:
        return batch
    log_append_time = bool(attributes & TIMESTAMP_TYPE_BIT)
    builder = DefaultRecordBatchBuilder(2, attributes & CODEC_MASK, bool(attributes & TRANSACTIONAL_BIT),
                                        producer_id, producer_epoch, base_sequence, batch_size=1 << 31)
    for offset_delta, ts_delta, key, value, headers in kept:
        timestamp = max_ts if log_append_time else first_ts + ts_delta
        builder.append(offset_delta, timestamp, key, value, headers)
    out = builder.build()
    # Kafka keeps the original lastOffsetDelta (KAFKA-5443) and, for LogAppendTime, the batch times.
    header = list(HEADER.unpack_from(out))
    header[0], header[6] = base_offset, last_delta
    if log_append_time:
        header[5] |= TIMESTAMP_TYPE_BIT
        header[7], header[8] = first_ts, max_ts
    HEADER.pack_into(out, 0, *header)
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return out


def gap_batch(first_offset: int, last_offset: int) -> bytes:
    """An empty batch covering [first_offset, last_offset]: consumers resume after last_offset."""
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, first_offset, HEADER_SIZE - 12, 0, 2, 0, 0, last_offset - first_offset,
                     NO_TIMESTAMP, NO_TIMESTAMP, -1, -1, -1, 0)
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return bytes(out)
