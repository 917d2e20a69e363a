"""Retention: whole oldest segments go, log start offsets move, lookups follow."""

from __future__ import annotations

import time

import pytest

from store import OffsetOutOfRange, Store
from store.records import decode
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


def test_topic_retention_ms_moves_only_that_topics_log_start_past_wholly_older_batches(data_dir):
    s = Store.open(data_dir, tiny_config(retention_ms=-1))
    s.create_topic("short", 1, {"retention.ms": "1000"})
    s.create_topic("long", 1, {})
    for topic in ("short", "long"):
        append(s, topic, 0, build_batch([b"a", b"b"], timestamps=[1_000, 5_000]))  # offsets 0-1: one old record
        append(s, topic, 0, build_batch([b"c"], timestamps=[2_000]))  # offset 2: wholly old
        append(s, topic, 0, build_batch([b"d"], timestamps=[9_500]))  # offset 3: within 1 s of 10,000
        append(s, topic, 0, build_batch([b"e"], timestamps=[3_000]))  # offset 4: old, after a newer batch
    assert s.enforce_retention(now_ms=10_000) == 0  # no commitlog segment deleted
    # batch 0-1 has a record at 5,000 < 9,000 too: the running maximum only passes 9,000 at offset 3
    assert s.log_start_offset("short", 0) == 3
    assert s.log_start_offset("long", 0) == 0
    with pytest.raises(OffsetOutOfRange):
        s.read("short", 0, 2, 1 << 20)
    assert s.read("short", 0, 3, 1 << 20).batches
    assert s.enforce_retention(now_ms=100_000) == 0
    assert s.log_start_offset("short", 0) == 5  # everything expired: the log is empty at its end
    s.close()
    reopened = Store.open(data_dir, tiny_config(retention_ms=-1))  # the checkpoint kept it
    assert reopened.log_start_offset("short", 0) == 5 and reopened.log_start_offset("long", 0) == 0
    reopened.close()


def test_topic_retention_bytes_keeps_the_newest_batches_within_the_limit(data_dir):
    s = Store.open(data_dir, tiny_config(retention_ms=-1))
    s.create_topic("t", 1, {"retention.bytes": "250"})
    sizes = []
    for i in range(6):
        batch = build_batch([bytes(50)] * 2)
        sizes.append(len(batch))
        append(s, "t", 0, batch)  # offsets 2i, 2i+1
    s.enforce_retention()
    start = s.log_start_offset("t", 0)
    kept = len(sizes) - start // 2
    assert start % 2 == 0 and sum(sizes[-kept:]) <= 250 < sum(sizes[-kept - 1:])
    s.close()


def test_delete_records_moves_the_log_start_and_survives_a_restart(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    for i in range(5):
        append(s, "t", 0, build_batch([bytes([i])]))
    assert s.delete_records("t", 0, 3) == 3
    assert s.delete_records("t", 0, 1) == 3  # below the log start: nothing moves
    with pytest.raises(OffsetOutOfRange):
        s.delete_records("t", 0, 6)
    with pytest.raises(OffsetOutOfRange):
        s.read("t", 0, 2, 1 << 20)
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert s.log_start_offset("t", 0) == 3
    assert s.delete_records("t", 0, -1) == 5  # -1: up to the high watermark
    s.close()


def test_a_topic_with_longer_retention_keeps_the_segments_and_the_others_expire_by_the_default(data_dir):
    """log.retention.ms=1000 with one topic at retention.ms=-1: no segment is deleted (that
    topic keeps its records, as on Kafka), and the other topic's log start moves by the default."""
    s = Store.open(data_dir, tiny_config(retention_ms=1_000))
    s.create_topic("forever", 1, {"retention.ms": "-1"})
    s.create_topic("plain", 1, {})
    for i in range(30):  # several 8 KiB segments
        for topic in ("forever", "plain"):
            append(s, topic, 0, build_batch([bytes(300)], timestamps=[1_000 + i]))
    assert len(segment_names(data_dir)) > 2
    assert s.enforce_retention(now_ms=1_000_000) == 0
    assert s.log_start_offset("forever", 0) == 0 and len(s.read("forever", 0, 0, 1 << 20).batches) > 0
    assert s.log_start_offset("plain", 0) == 30
    s.close()


def test_retention_deletes_segments_under_a_compacted_topic_and_carries_its_records(data_dir):
    """cleanup.policy=compact promises the latest record of every key, not every segment:
    time retention deletes segments, after the compact-only topic's live batches in them are
    appended again (store/compaction.py); a compact,delete topic's records expire with them."""
    s = Store.open(data_dir, tiny_config(retention_ms=1_000))
    s.create_topic("state", 1, {"cleanup.policy": "compact", "retention.ms": "1000"})
    s.create_topic("events", 1, {"cleanup.policy": "compact,delete"})
    for i in range(30):
        for topic in ("state", "events"):
            append(s, topic, 0, build_batch([bytes(300)], keys=[b"k%d" % i], timestamps=[1_000 + i]))
    later = time.time_ns() // 1_000_000 + 60_000
    assert s.enforce_retention(now_ms=later) > 0
    assert s.log_start_offset("state", 0) == 0
    offsets = [r.offset for b in s.read("state", 0, 0, 1 << 20).batches for r in decode(b)]
    assert offsets == list(range(30))  # every key's latest record, carried forward
    assert 0 < s.log_start_offset("events", 0) < 30  # what the active segment holds stays
    s.close()
