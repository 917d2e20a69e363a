"""Re-encoding stored batches for views: keep only the records whose real tag matches.

Offsets, timestamps and producer fields are kept as Kafka keeps them for a
compacted topic: the batch keeps its baseOffset, lastOffsetDelta (so a
consumer's next fetch starts after the whole original batch), baseTimestamp,
maxTimestamp, timestamp type, producer id, epoch and base sequence; the CRC is
recomputed. Because the batch's base offset and base timestamp stay, each kept
record is copied byte for byte (its offset and timestamp deltas stay valid). The
codec is kept: the kept records are compressed again with it, unless that does
not make them smaller (then the batch goes uncompressed, as kafka-python's
builder decides). A batch whose every record matches is returned as stored.

`gap_batch` is an empty batch (zero records) spanning offsets with no match, as
compaction leaves behind; it moves consumers past them. Never touches the store.
"""

from __future__ import annotations

from collections.abc import Collection

import crc32c
from kafka import codec
from kafka.record.util import decode_varint

from protocol.record_batch import CODEC_MASK, CONTROL_BIT, CRC_START, HEADER, HEADER_SIZE

_DECOMPRESS = {1: codec.gzip_decode, 2: codec.snappy_decode, 3: codec.lz4_decode, 4: codec.zstd_decode}
_COMPRESS = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode, 4: codec.zstd_encode}
NO_TIMESTAMP = -1


def _records_area(batch: memoryview, attributes: int) -> bytes:
    body = bytes(batch[HEADER_SIZE:])  # bytes index faster than a memoryview in the record walk
    kind = attributes & CODEC_MASK
    return body if kind == 0 else _DECOMPRESS[kind](body)


def record_tag(buf: bytes, pos: int, end: int, tag_header: str) -> bytes | None:
    """The value of the first `tag_header` header of the record body buf[pos:end], or None."""
    pos += 1  # attributes, unused in v2
    _, pos = decode_varint(buf, pos)  # timestamp delta
    _, pos = decode_varint(buf, pos)  # offset delta
    for _ in range(2):  # key, value
        size, pos = decode_varint(buf, pos)
        pos += max(size, 0)
    count, pos = decode_varint(buf, pos)
    wanted = tag_header.encode()
    for _ in range(count):
        size, pos = decode_varint(buf, pos)
        name = buf[pos:pos + size]
        pos += size
        size, pos = decode_varint(buf, pos)
        if name == wanted:
            return None if size < 0 else buf[pos:pos + size]
        pos += max(size, 0)
    if pos > end:
        raise ValueError("record length does not match its fields")
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
        start = pos
        # the record length varint, inlined: this loop runs for every record before the last match
        byte = buf[pos]
        pos += 1
        raw, shift = byte & 0x7F, 7
        while byte & 0x80:
            byte = buf[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            shift += 7
        end = pos + ((raw >> 1) ^ -(raw & 1))
        if index in wanted and record_tag(buf, pos, end, tag_header) in tags:
            kept.append(buf[start:end])
        pos = end
    if not kept:
        return None
    if len(kept) == count:
        return batch
    records = b"".join(kept)
    kind = attributes & CODEC_MASK
    if kind:
        compressed = _COMPRESS[kind](records)
        if len(compressed) < len(records):
            records = compressed
        else:
            attributes &= ~CODEC_MASK
    out = bytearray(HEADER_SIZE) + records
    HEADER.pack_into(out, 0, base_offset, len(out) - 12, 0, 2, 0, attributes, last_delta, first_ts, max_ts,
                     producer_id, producer_epoch, base_sequence, len(kept))
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return out


def gap_batch(first_offset: int, last_offset: int) -> bytes:
    """An empty batch covering [first_offset, last_offset]: consumers resume after last_offset."""
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, first_offset, HEADER_SIZE - 12, 0, 2, 0, 0, last_offset - first_offset,
                     NO_TIMESTAMP, NO_TIMESTAMP, -1, -1, -1, 0)
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return bytes(out)
