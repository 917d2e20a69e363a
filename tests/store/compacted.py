"""Records for compacted topics, as the store tests write them."""

from __future__ import annotations

from store import Store
from store.records import decode


COMPACT = {"cleanup.policy": "compact", "key.index.enable": "false"}


def _records(store: Store, topic: str = "c", partition: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a consumer reading from the log start gets."""
    q = store._parts[topic][partition].queue
    offset, out = q.log_start, []
    while offset < store.high_watermark(topic, partition):
        batches = store.read(topic, partition, offset, 1 << 20).batches
        if not batches:
            break
        for batch in batches:
            decoded = decode(batch)
            out.extend((r.offset, r.key, r.value) for r in decoded if r.offset >= offset)
            offset = decoded.base_offset + decoded.last_offset_delta + 1
    return out
