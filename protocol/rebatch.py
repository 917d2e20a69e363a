"""Re-encoding a RecordBatch v2 with a subset of its records, as Kafka's compaction does.

Owns the walk over a batch's records (as raw byte spans, never decoded into objects) and
the rebuilt batch: it keeps the original baseOffset, lastOffsetDelta (so a consumer's next
fetch starts after the whole original batch), partitionLeaderEpoch, baseTimestamp,
maxTimestamp, timestamp type, producer id, epoch and base sequence; the CRC is recomputed. Because the base offset and
base timestamp stay, each kept record is copied byte for byte (its offset and timestamp
deltas stay valid). The codec is kept: the kept records are compressed again with it, unless
that does not make them smaller (then the batch goes uncompressed, as kafka-python's builder
decides). Used by tag-filtered views (broker/views/batches.py) and the log cleaner
(store/compaction.py). kafka-python's DefaultRecordBatch builds a Python object per record
and its builder re-encodes every field; copying the spans costs a fraction of that.
Sans-IO: bytes in, bytes out.
"""

from __future__ import annotations

from collections.abc import Iterator

import crc32c
from kafka import codec

from protocol.record_batch import CODEC_MASK, CRC_START, HEADER, HEADER_SIZE

_DECOMPRESS = {1: codec.gzip_decode, 2: codec.snappy_decode, 3: codec.lz4_decode, 4: codec.zstd_decode}
_COMPRESS = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode, 4: codec.zstd_encode}


def records_area(batch: bytes | bytearray | memoryview, attributes: int) -> bytes:
    """The batch's records, decompressed."""
    body = bytes(batch[HEADER_SIZE:])  # bytes index faster than a memoryview in the record walk
    kind = attributes & CODEC_MASK
    return body if kind == 0 else _DECOMPRESS[kind](body)


def record_spans(buf: bytes, count: int) -> Iterator[tuple[int, int, int]]:
    """(start, body, end) of each of the first `count` records of a records area: the record
    with its length prefix is buf[start:end], its fields buf[body:end]."""
    pos = 0
    for _ in range(count):
        start = pos
        # the record length varint, inlined: this loop runs for every record
        byte = buf[pos]
        pos += 1
        raw, shift = byte & 0x7F, 7
        while byte & 0x80:
            byte = buf[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            shift += 7
        end = pos + ((raw >> 1) ^ -(raw & 1))
        if end > len(buf):
            raise ValueError("record length runs past the batch")
        yield start, pos, end
        pos = end


def rebuilt(batch: bytes | bytearray | memoryview, kept: list[bytes]) -> bytearray:
    """The batch with only the `kept` records (raw spans from record_spans, in order)."""
    (base_offset, _, leader_epoch, _, _, attributes, last_delta, first_ts, max_ts, producer_id, producer_epoch,
     base_sequence, _count) = HEADER.unpack_from(batch)
    records = b"".join(kept)
    kind = attributes & CODEC_MASK
    if kind:
        compressed = _COMPRESS[kind](records)
        if len(compressed) < len(records):
            records = compressed
        else:
            attributes &= ~CODEC_MASK
    out = bytearray(HEADER_SIZE) + records
    HEADER.pack_into(out, 0, base_offset, len(out) - 12, leader_epoch, 2, 0, attributes, last_delta, first_ts, max_ts,
                     producer_id, producer_epoch, base_sequence, len(kept))
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return out
