"""Retention policy: which of the oldest commitlog segments to delete.

Owns the rule (by time: newest store timestamp older than log.retention.ms; by size: total
commitlog bytes over log.retention.bytes; only whole segments, oldest first, never the
active one). Never unlinks files itself: the Store applies a decision off the append path,
from its periodic retention thread (store.periodic).
"""

from __future__ import annotations

from collections.abc import Sequence

from store.segment import Segment


def segments_to_delete(segments: Sequence[Segment], active: Segment, now_ms: int,
                       retention_ms: int, retention_bytes: int) -> int:
    """How many of the oldest segments retention removes."""
    limit = segments.index(active)
    count = 0
    if retention_ms >= 0:
        while count < limit and 0 <= segments[count].newest_timestamp < now_ms - retention_ms:
            count += 1
    if retention_bytes >= 0:
        total = sum(s.size for s in segments[:limit + 1])
        total -= sum(s.size for s in segments[:count])
        while count < limit and total > retention_bytes:
            total -= segments[count].size
            count += 1
    return count
