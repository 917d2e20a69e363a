"""Retention: whole oldest segments go, log start offsets move, lookups follow."""

from __future__ import annotations

import pytest

from store import OffsetOutOfRange, Store
from tests.store.conftest import append, build_batch, segment_names, tiny_config


def _fill(store: Store, n: int = 40) -> None:
    store.create_topic("t", 2, {"key.index.enable": "true"})
    for i in range(n):
        append(store, "t", i % 2, build_batch([bytes([i]) * 600], keys=[f"k{i}".encode()],
                                               timestamps=[10_000 + i]))


def test_retention_by_size_deletes_oldest_segments_and_moves_log_start(data_dir):
    s = Store.open(data_dir, tiny_config(retention_bytes=3 * 8192))
    _fill(s)
    names_before = segment_names(data_dir)
    deleted = s.enforce_retention()
    assert deleted > 0
    names_after = set(segment_names(data_dir))
    assert not names_after & set(names_before[:deleted])
    assert set(names_before[deleted:]) <= names_after
    start = s.log_start_offset("t", 0)
    assert start > 0
    assert s.read("t", 0, start, 1).batches
    with pytest.raises(OffsetOutOfRange):
        s.read("t", 0, start - 1, 1)
    assert s.offset_for_timestamp("t", 0, 0)[0] == start
    assert s.lookup_key("t", b"k0", 0, 2**62) == []
    assert len(s.lookup_key("t", b"k39", 0, 2**62)) == 1
    s.close()


def test_retention_by_time_keeps_recent_segments(data_dir):
    s = Store.open(data_dir, tiny_config(retention_ms=60_000))
    _fill(s)
    assert s.enforce_retention() == 0
    import time
    deleted = s.enforce_retention(now_ms=time.time_ns() // 1_000_000 + 120_000)
    assert deleted > 0
    assert s.enforce_retention(now_ms=time.time_ns() // 1_000_000 + 120_000) == 0  # never the active one
    assert s.high_watermark("t", 0) == 20
    assert s.log_start_offset("t", 0) > 0
    s.close()


def test_log_start_survives_reopen_and_rebuild(data_dir):
    s = Store.open(data_dir, tiny_config(retention_bytes=2 * 8192))
    _fill(s)
    s.enforce_retention()
    starts = [s.log_start_offset("t", p) for p in (0, 1)]
    hws = [s.high_watermark("t", p) for p in (0, 1)]
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert [s.log_start_offset("t", p) for p in (0, 1)] == starts
    s.close()
    (data_dir / "clean_shutdown").unlink()
    s = Store.open(data_dir, tiny_config())
    assert [s.log_start_offset("t", p) for p in (0, 1)] == starts
    assert [s.high_watermark("t", p) for p in (0, 1)] == hws
    s.close()


def test_readers_keep_views_of_deleted_segments(data_dir):
    s = Store.open(data_dir, tiny_config(retention_bytes=8192))
    _fill(s)
    view = s.read("t", 0, 0, 1).batches[0]
    copy = bytes(view)
    assert s.enforce_retention() > 0
    assert bytes(view) == copy
    s.close()


def test_reads_racing_retention_never_get_the_wrong_segment(tmp_path):
    """segment_at runs without the lock (fetches, lookups) while the retention thread detaches
    the oldest segments: every answer is the segment holding the position, or None once it is
    gone, never a neighbour (whose mapping a read would then slice at a negative offset)."""
    import sys
    import threading

    from store.commitlog import CommitLog
    from store.segment import Segment

    size = 4096
    log = CommitLog(tmp_path / "commitlog", size)
    for i in range(1, 400):
        log._add(Segment.create(log.directory, i * size, size))
    log.active = log.segments[-1]
    wrong: list[tuple[int, int]] = []
    stop = threading.Event()

    def reader() -> None:
        position = 0
        while not stop.is_set():
            position = (position + 4099) % (400 * size)
            seg = log.segment_at(position)
            if seg is not None and not seg.start <= position < seg.end:
                wrong.append((position, seg.start))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race needs one between two lines
    try:
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for t in readers:
            t.start()
        while len(log.segments) > 1:
            for seg in log.detach_oldest(1):
                seg.drop(unlink=True)
        stop.set()
        for t in readers:
            t.join()
    finally:
        sys.setswitchinterval(old)
        log.close()
    assert wrong == []
