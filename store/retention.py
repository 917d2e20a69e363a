"""Retention policy: which of the oldest commitlog segments to delete, and the thread asking.

Owns the rule (by time: newest store timestamp older than log.retention.ms; by size: total
commitlog bytes over log.retention.bytes; only whole segments, oldest first, never the
active one) and the periodic thread. Never unlinks files itself: the Store applies a
decision off the append path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from store.segment import Segment

log = logging.getLogger(__name__)


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


class _Enforcer(Protocol):
    def enforce_retention(self, now_ms: int | None = None) -> int: ...


class RetentionThread:
    def __init__(self, store: _Enforcer, interval_s: float) -> None:
        self._store = store
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._store.enforce_retention()
            except Exception:
                log.exception("retention pass failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
