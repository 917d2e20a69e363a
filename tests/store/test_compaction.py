"""Log compaction in the store (store/compaction.py): the latest record per key survives,
offsets keep their gaps, tombstones go after delete.retention.ms, relocated batches survive
crashes and rebuilds, and retention carries live compacted batches before deleting segments."""

from __future__ import annotations

import random
import time

import pytest

from store import Store
from store.records import decode
from tests.store.conftest import append, build_batch, crash_to, kill_at_random, saved_checkpoint, tiny_config
from tests.store.compacted import COMPACT, _records
from tests.kit.tier import soak


def _config(**overrides):
    values = {"cleaner_enable": False, "segment_bytes": 1 << 16, "queue_entries_per_file": 64}
    values.update(overrides)
    return tiny_config(**values)


@pytest.fixture
def cstore(data_dir):
    s = Store.open(data_dir, _config())
    yield s
    s.close()


def _produce(store: Store, pairs: list[tuple[bytes, bytes | None]], per_batch: int = 4, topic: str = "c") -> None:
    for i in range(0, len(pairs), per_batch):
        chunk = pairs[i:i + per_batch]
        append(store, topic, 0, build_batch([v for _, v in chunk], keys=[k for k, _ in chunk],
                                            timestamps=[1_000 + i + j for j in range(len(chunk))]))


def _latest(pairs):
    latest = {}
    for offset, (k, v) in enumerate(pairs):
        latest[k] = (offset, v)
    return latest


def test_the_latest_record_of_every_key_survives_with_its_offset(cstore):
    cstore.create_topic("c", 1, COMPACT)
    rng = random.Random(1)
    pairs = [(b"k%d" % rng.randrange(10), b"v%d" % i) for i in range(200)]
    _produce(cstore, pairs)
    stats = cstore.clean(force=True)
    assert stats.records_removed > 0
    got = _records(cstore)
    # the last batch (196-199) is never cleaned and, as Kafka's active segment, does not
    # supersede anything yet
    latest = _latest(pairs[:196])
    expected = sorted({(o, k, v) for k, (o, v) in latest.items()} |
                      {(o, pairs[o][0], pairs[o][1]) for o in range(196, 200)})
    assert got == expected
    assert cstore.high_watermark("c", 0) == 200 and cstore.log_start_offset("c", 0) == 0


def test_reading_from_inside_a_gap_returns_the_next_record(cstore):
    cstore.create_topic("c", 1, COMPACT)
    pairs = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", b"2")] + [(b"a", b"3"), (b"x", b"x")] * 2
    _produce(cstore, pairs, per_batch=2)
    cstore.clean(force=True)
    got = _records(cstore)
    assert [o for o, _, _ in got] == [3, 4, 5, 6, 7]  # b=2, a=3, x; 6 and 7 are the last batch
    batches = cstore.read("c", 0, 1, 1 << 20).batches  # offset 1 is a gap: the next batch starts earlier
    first = decode(batches[0])
    assert [r.offset for r in first] == [3] and first.base_offset == 2


def test_tombstones_stay_until_delete_retention_then_go(cstore):
    cstore.create_topic("c", 1, dict(COMPACT, **{"delete.retention.ms": "1000"}))
    _produce(cstore, [(b"a", b"1"), (b"b", b"1"), (b"a", None), (b"z", b"z")], per_batch=1)
    now = int(time.time() * 1000)
    cstore.clean(now_ms=now, force=True)
    assert [(o, k, v) for o, k, v in _records(cstore)] == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"z")]
    # timestamps of the records are 1,000 ms after the epoch: long past delete.retention.ms
    cstore.clean(now_ms=now, force=True)
    assert [o for o, _, _ in _records(cstore)] == [1, 3]


def test_compacted_state_survives_a_crash_and_a_full_rebuild(data_dir):
    store = Store.open(data_dir, _config())
    store.create_topic("c", 1, COMPACT)
    pairs = [(b"k%d" % (i % 7), b"v%d" % i) for i in range(120)]
    _produce(store, pairs, per_batch=5)
    ckpt = saved_checkpoint(store, data_dir)
    store.clean(force=True)
    before = _records(store)
    assert len(before) < 30
    store.close()
    crash_to(data_dir, ckpt)  # the relocations come after the checkpoint: re-derived from the commitlog
    store = Store.open(data_dir, _config())
    assert _records(store) == before
    store.close()
    (data_dir / "checkpoint").unlink()  # a full rebuild: dropped batches may come back, relocated ones stay
    store = Store.open(data_dir, _config())
    after = _records(store)
    assert set(before) <= set(after)
    latest = {k: (o, v) for o, k, v in after}
    assert all(latest[k] == (o, v) for k, (o, v) in _latest(pairs).items())
    store.clean(force=True)
    assert _records(store) == before
    store.close()


def test_retention_carries_live_compacted_batches_and_frees_segments(data_dir):
    store = Store.open(data_dir, _config(segment_bytes=1 << 15))
    store.create_topic("c", 1, COMPACT)
    pairs = [(b"k%03d" % (i % 50), b"%06d" % i + b"." * 200) for i in range(3000)]
    _produce(store, pairs, per_batch=10)
    segments_before = len(store._log.segments)
    assert segments_before > 10
    store.clean(force=True)
    deleted = store.enforce_retention()
    assert deleted >= segments_before - 4
    got = _records(store)
    latest = _latest(pairs)
    assert {k: (o, v) for o, k, v in got} == latest
    store.close()
    store = Store.open(data_dir, _config(segment_bytes=1 << 15))
    assert {k: (o, v) for o, k, v in _records(store)} == latest
    (data_dir / "checkpoint").unlink()
    store.close()
    store = Store.open(data_dir, _config(segment_bytes=1 << 15))  # full rebuild: only carried copies remain
    assert {k: (o, v) for o, k, v in _records(store)} == latest
    store.close()


def test_a_delete_topic_holds_its_segments_until_it_expires(data_dir):
    store = Store.open(data_dir, _config(segment_bytes=1 << 15))
    store.create_topic("c", 1, COMPACT)
    store.create_topic("d", 1, {"key.index.enable": "false"})
    append(store, "d", 0, build_batch([b"keep me"]))
    pairs = [(b"k%03d" % (i % 50), b"." * 200) for i in range(2000)]
    _produce(store, pairs, per_batch=10)
    store.clean(force=True)
    assert store.enforce_retention() == 0  # "d"'s record lies in the first segment
    assert store.read("d", 0, 0, 1 << 20).batches
    store.close()


@pytest.mark.crash
def test_sigkill_while_cleaning_and_carrying_loses_no_latest_value(tmp_path):
    """A writer appends keyed records, cleans and runs retention (relocating batches, deleting
    segments) until SIGKILLed at a random moment, 15 times (5 per push). After each kill the store opens,
    every record it serves sits at its own offset, and for every key the newest acknowledged
    record is there, or a newer one of the same key."""
    from tests.store.compaction_crash_writer import config

    data_dir = tmp_path / "data"
    latest: dict[bytes, int] = {}  # key -> newest acknowledged offset
    acked_end = 0
    rng = random.Random(11)
    for _ in range(soak(full=15, push=5)):
        for line in kill_at_random("tests.store.compaction_crash_writer", data_dir, rng, 0.1, 0.8):
            parts = line.split()
            if len(parts) == 2:
                base, keys = int(parts[0]), parts[1].encode().split(b",")
                for i, key in enumerate(keys):
                    latest[key] = max(latest.get(key, -1), base + i)
                acked_end = max(acked_end, base + len(keys))
        store = Store.open(data_dir, config())
        try:
            assert store.high_watermark("c", 0) >= acked_end
            got = _records(store)
            assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
            for offset, key, value in got:
                assert value.split(b".")[0] == key + b":%d" % offset, "a record at the wrong offset"
            newest = {}
            for offset, key, _ in got:
                newest[key] = offset
            for key, offset in latest.items():
                assert newest.get(key, -1) >= offset, f"{key!r}: acknowledged offset {offset} lost"
            deleted = store._log.min_position > 0  # retention deleted segments under the cleaner
        finally:
            store.close()
    assert acked_end > 300 and deleted


def test_a_million_updates_over_a_thousand_keys_shrink_to_about_a_thousand_records(data_dir):
    """The issue's figure: 1,000,000 updates over 1,000 keys (random keys, 1,000 records a
    batch) leave about 1,000 records after a clean, and retention then gives the disk back."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from protocol.record_batch import parse_header

    store = Store.open(data_dir, _config(segment_bytes=4 << 20, queue_entries_per_file=300_000))
    store.create_topic("c", 1, COMPACT)
    rng = random.Random(5)
    latest: dict[bytes, int] = {}
    for b in range(1000):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2**30)
        for i in range(1000):
            key = b"key-%04d" % rng.randrange(1000)
            builder.append(i, timestamp=1_000, key=key, value=b"v%07d" % (b * 1000 + i), headers=[])
            latest[key] = b * 1000 + i
        batch = bytes(builder.build())
        store.append("c", 0, batch, parse_header(batch))
    segments = len(store._log.segments)
    stats = store.clean(force=True)
    assert stats.records_read == 999_000  # all but the last batch
    q = store._parts["c"][0].queue
    live = q.count_live(0, 1_000_000)
    assert 1_000 <= live <= 2_000, live  # the latest of each key, plus the uncleaned last batch
    before_last = {k: o for k, o in latest.items() if o < 999_000}
    got = {k: o for o, k, _ in _records(store)}
    assert all(got[k] >= o for k, o in before_last.items())
    assert store.enforce_retention() >= segments - 3  # only compacted data: old segments go
    assert {k: o for o, k, _ in _records(store)} == got
    store.close()


def test_the_cleaner_point_survives_a_restart_but_not_a_rebuild(data_dir):
    store = Store.open(data_dir, _config())
    store.create_topic("c", 1, COMPACT)
    _produce(store, [(b"k%d" % (i % 5), b"v%d" % i) for i in range(40)], per_batch=4)
    store.clean(force=True)
    point = store._parts["c"][0].cleaned_to
    assert point == 36
    store.close()
    store = Store.open(data_dir, _config())
    assert store._parts["c"][0].cleaned_to == point
    assert store.clean().partitions == 0  # nothing new is dirty: no pass from the log start
    store.close()
    (data_dir / "checkpoint").unlink()
    store = Store.open(data_dir, _config())
    assert store._parts["c"][0].cleaned_to == 0
    store.close()


def test_a_topic_altered_from_compact_to_delete_keeps_its_gaps_readable(data_dir):
    """After cleaning, the queue has gaps and relocated entries; switching the topic to
    cleanup.policy=delete must not make reads fail at the gaps, nor let retention bisect the
    queue as if its positions grew with offsets (also after a restart)."""
    store = Store.open(data_dir, _config(segment_bytes=1 << 15))
    store.create_topic("c", 1, COMPACT)
    _produce(store, [(b"k%d" % (i % 7), b"%04d" % i + b"." * 150) for i in range(600)], per_batch=5)
    store.clean(force=True)
    before = _records(store)
    assert len(before) < 100
    store.alter_topic_configs("c", {"cleanup.policy": "delete", "key.index.enable": "false"})
    assert _records(store) == before
    assert store.enforce_retention() > 0  # segments holding only superseded records still go
    assert _records(store) == before
    store.close()
    store = Store.open(data_dir, _config(segment_bytes=1 << 15))
    assert store._parts["c"][0].relocated
    assert _records(store) == before
    store.close()
