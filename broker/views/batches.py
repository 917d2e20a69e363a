"""Re-encoding stored batches for views: keep only the records whose real tag matches.

The kept records are re-encoded by protocol/rebatch.py as Kafka's compaction does
(base offset, lastOffsetDelta, timestamps and producer fields kept; codec kept when it
still helps). A batch whose every record matches is returned as stored.

`gap_batch` is an empty batch (zero records) spanning offsets with no match, as
compaction leaves behind; it moves consumers past them. Never touches the store.
"""

from __future__ import annotations

from collections.abc import Collection

import crc32c
from kafka.record.util import decode_varint

from protocol.rebatch import rebuilt, record_spans, records_area
from protocol.record_batch import CONTROL_BIT, CRC_START, HEADER, HEADER_SIZE

NO_TIMESTAMP = -1


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
    """The batch with only the records at `candidates` (offset deltas whose tag hash matched)
    whose first `tag_header` header really is one of `tags`; None when no record qualifies.
    In a batch the log cleaner re-encoded (fewer records than its offsets span) a record's
    place is not its offset delta, so each record's delta is read; elsewhere they are equal."""
    fields = HEADER.unpack_from(batch)
    attributes, last_delta, count = fields[5], fields[6], fields[12]
    if attributes & CONTROL_BIT:
        return None
    wanted = {int(i) for i in candidates if 0 <= i <= last_delta}
    if not wanted:
        return None
    last_wanted = max(wanted)
    buf = records_area(batch, attributes)
    kept = []
    whole = count == last_delta + 1
    for index, (start, body, end) in enumerate(record_spans(buf, last_wanted + 1 if whole else count)):
        if not whole:
            _, at = decode_varint(buf, body + 1)  # attributes, timestamp delta
            index, _ = decode_varint(buf, at)
            if index > last_wanted:
                break
        if index in wanted and record_tag(buf, body, end, tag_header) in tags:
            kept.append(buf[start:end])
    if not kept:
        return None
    if len(kept) == count:
        return batch
    return rebuilt(batch, kept)


def gap_batch(first_offset: int, last_offset: int) -> bytes:
    """An empty batch covering [first_offset, last_offset]: consumers resume after last_offset."""
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, first_offset, HEADER_SIZE - 12, 0, 2, 0, 0, last_offset - first_offset,
                     NO_TIMESTAMP, NO_TIMESTAMP, -1, -1, -1, 0)
    out[17:21] = crc32c.crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return bytes(out)
