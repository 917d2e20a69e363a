"""Replication-ready store (issue 23, part C): leader epochs stored in each batch, the epoch
history per partition (Kafka's leader-epoch checkpoint) and a high watermark distinct from
the log end."""

from __future__ import annotations

import struct

import pytest

from store import OffsetOutOfRange, Store
from store.epochs import EpochCache
from tests.store.conftest import append, build_batch, tiny_config


def _epoch_of(batch) -> int:
    return struct.unpack_from(">i", batch, 12)[0]


def _crash(store: Store, data_dir) -> None:
    store.close()
    (data_dir / "clean_shutdown").unlink()


def test_epoch_cache_answers_as_kafkas_leader_epoch_file_cache():
    cache = EpochCache()
    assert cache.end_offset_for(0, 10) == (-1, -1)  # nothing known
    cache.assign(0, 0)
    cache.assign(2, 5)
    cache.assign(1, 7)  # older than the latest: ignored
    cache.assign(5, 9)
    assert cache.entries == [(0, 0), (2, 5), (5, 9)]
    assert cache.end_offset_for(5, 12) == (5, 12)  # the latest epoch ends at the log end
    assert cache.end_offset_for(2, 12) == (2, 9)
    assert cache.end_offset_for(3, 12) == (2, 9)  # no epoch 3: the largest below, and its end
    assert cache.end_offset_for(0, 12) == (0, 5)
    assert cache.end_offset_for(6, 12) == (-1, -1)  # newer than any this log knows
    cache.assign(7, 9)  # a new leader with no records in epoch 5: epoch 5's entry goes
    assert cache.entries == [(0, 0), (2, 5), (7, 9)]
    cache.truncate_from_end(6)
    assert cache.entries == [(0, 0), (2, 5)]
    assert cache.end_offset_for(2, 6) == (2, 6)


def test_each_stored_batch_carries_its_leaders_epoch(store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"a", b"b"]))
    assert store.leader_epoch("t", 0) == 0 and store.epoch_entries("t", 0) == [(0, 0)]
    store.become_leader("t", 0, 4)
    append(store, "t", 0, build_batch([b"c"]))
    batches = store.read("t", 0, 0, 1 << 20).batches
    assert [_epoch_of(b) for b in batches] == [0, 4]
    assert store.epoch_entries("t", 0) == [(0, 0), (4, 2)]
    assert store.end_offset_for_epoch("t", 0, 0) == (0, 2)
    assert store.end_offset_for_epoch("t", 0, 3) == (0, 2)
    assert store.end_offset_for_epoch("t", 0, 4) == (4, 3)


@pytest.mark.parametrize("how", ["clean", "crash", "rebuild"])
def test_the_epoch_history_survives_a_restart(data_dir, how):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 2, {})
    append(s, "t", 0, build_batch([b"a"]))
    s.become_leader("t", 0, 2)
    append(s, "t", 0, build_batch([b"b", b"c"]))
    s.write_checkpoint()
    s.become_leader("t", 0, 3)  # after the checkpoint: recovery finds it in the batch
    append(s, "t", 0, build_batch([b"d"]))
    if how == "clean":
        s.close()
    else:
        _crash(s, data_dir)
        if how == "rebuild":
            (data_dir / "checkpoint").unlink()
    s = Store.open(data_dir, tiny_config())
    assert s.epoch_entries("t", 0) == [(0, 0), (2, 1), (3, 3)]
    assert s.leader_epoch("t", 0) == 3
    assert s.epoch_entries("t", 1) == [(0, 0)]
    append(s, "t", 0, build_batch([b"e"]))
    assert _epoch_of(s.read("t", 0, 4, 1 << 20).batches[0]) == 3
    s.close()


def test_a_follower_learns_epochs_from_shipped_batches_and_truncation_forgets_them(tmp_path):
    leader = Store.open(tmp_path / "leader", tiny_config())
    follower = Store.open(tmp_path / "follower", tiny_config())
    leader.create_topic("t", 1, {})
    append(leader, "t", 0, build_batch([b"a"]))
    leader.become_leader("t", 0, 6)
    common = leader.log_end_position
    append(leader, "t", 0, build_batch([b"b"]))
    append(leader, "t", 0, build_batch([b"c"]))
    while follower.log_end_position < leader.log_end_position:
        at, data = leader.read_log(follower.log_end_position, 1 << 20)
        follower.append_replicated(at, data)
    assert follower.epoch_entries("t", 0) == [(0, 0), (6, 1)]
    assert follower.end_offset_for_epoch("t", 0, 0) == (0, 1)
    leader.truncate_log(common)  # before epoch 6's first batch: the batches go, and the epoch with them
    assert leader.epoch_entries("t", 0) == [(0, 0)]
    leader.close()
    follower.close()


def test_reads_stop_at_the_high_watermark_below_the_log_end(store):
    store.create_topic("t", 1, {})
    for v in (b"a", b"b", b"c"):
        append(store, "t", 0, build_batch([v]))
    assert store.high_watermark("t", 0) == store.log_end_offset("t", 0) == 3  # one node: equal
    assert store.set_high_watermark("t", 0, 1) == 1
    result = store.read("t", 0, 0, 1 << 20)
    assert len(result.batches) == 1 and result.high_watermark == 1
    assert store.read("t", 0, 2, 1 << 20).batches == []  # beyond it, within the log: nothing yet
    with pytest.raises(OffsetOutOfRange):
        store.read("t", 0, 4, 1 << 20)
    assert store.set_high_watermark("t", 0, 0) == 1  # never back
    assert store.set_high_watermark("t", 0, 99) == 3  # never past the log end
    append(store, "t", 0, build_batch([b"d"]))
    assert store.high_watermark("t", 0) == 3 and store.log_end_offset("t", 0) == 4
    assert store.set_high_watermark("t", 0, None) == 4
