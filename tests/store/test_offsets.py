"""Committed offsets: records of the commitlog's state topic, durable across reopen and
crashes, bounded by retention while the broker runs (issue 23, bug 4)."""

from __future__ import annotations

import time

import pytest

from store import Store
from store.state import STATE_TOPIC
from tests.store.conftest import append, build_batch, tiny_config


def _crash(store: Store, data_dir) -> None:
    """Close, then remove the clean marker as if the process had died."""
    store.close()
    (data_dir / "clean_shutdown").unlink()


def test_commit_and_fetch_round_trip(data_dir):
    s = Store.open(data_dir, tiny_config())
    o = s.offsets
    o.commit("g", "t", 0, 42, "meta", 3)
    o.commit("g", "t", 0, 43, None, 4)
    o.commit("h", "u", 1, 7)
    assert o.fetch("g", "t", 0) == (43, None, 4)
    assert o.fetch("g", "t", 1) is None
    assert sorted(o.groups()) == ["g", "h"]
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert s.offsets.fetch("g", "t", 0) == (43, None, 4)
    assert s.offsets.fetch("h", "u", 1) == (7, "", -1)
    s.close()
    assert not (data_dir / "offsets.log").exists()


def test_commits_survive_a_crash_and_a_full_rebuild(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.offsets.commit_many("g", [("t", 0, 5, "a", 1), ("t", 1, 6, "b", 1)])
    _crash(s, data_dir)
    s = Store.open(data_dir, tiny_config())  # recovered from the checkpoint
    assert s.offsets.fetch_group("g") == {("t", 0): (5, "a", 1), ("t", 1): (6, "b", 1)}
    s.offsets.commit("g", "t", 0, 9)
    _crash(s, data_dir)
    (data_dir / "checkpoint").unlink()  # nothing derived is trusted: everything from the commitlog
    s = Store.open(data_dir, tiny_config())
    assert s.offsets.fetch("g", "t", 0) == (9, "", -1)
    assert s.offsets.fetch("g", "t", 1) == (6, "b", 1)
    s.close()


def test_delete_group_is_durable(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.offsets.commit_many("g", [("t", 0, 1, "", -1), ("t", 1, 2, "", -1)])
    s.offsets.commit("keep", "t", 0, 3)
    s.offsets.delete_group("g")
    assert s.offsets.groups() == ["keep"]
    _crash(s, data_dir)
    s = Store.open(data_dir, tiny_config())
    assert s.offsets.groups() == ["keep"] and s.offsets.fetch("g", "t", 0) is None
    s.close()


def test_offsets_stay_bounded_by_retention_and_the_latest_survive(data_dir):
    """Bug 4: offsets.log grew with every commit while the broker ran. Now commits are
    commitlog records: retention deletes old segments, and the live ones are carried forward
    first, so the state holds about one record per key however many commits were made."""
    config = tiny_config(retention_ms=1)
    s = Store.open(data_dir, config)
    s.create_topic("data", 1, {})
    for i in range(400):
        s.offsets.commit("g", "data", 0, i, "m", 0)
        s.offsets.commit("g2", "data", 0, 1000 + i, None, 0)
        append(s, "data", 0, build_batch([b"x" * 200]))
    state_q = s._parts[STATE_TOPIC][0].queue
    assert state_q.high_watermark > 800
    assert len(s._log.segments) > 20
    time.sleep(0.01)  # time passing on purpose: past retention.ms
    s.enforce_retention()
    assert len(s._log.segments) <= 2
    live = state_q.high_watermark - state_q.log_start
    assert live <= 10, live  # the topic, two offsets, carried forward once or twice
    assert s.offsets.fetch("g", "data", 0) == (399, "m", 0)
    _crash(s, data_dir)
    (data_dir / "checkpoint").unlink()
    s = Store.open(data_dir, tiny_config())
    assert s.offsets.fetch("g", "data", 0) == (399, "m", 0)
    assert s.offsets.fetch("g2", "data", 0) == (1399, None, 0)
    assert "data" in s.topics()
    s.close()


def test_on_a_full_disk_retention_still_carries_the_state_and_frees_segments(data_dir):
    """The last bytes of each segment take only state records: with no room for a next
    segment, retention can still carry the live ones forward and delete old segments."""
    from store import StorageFull
    from tests.store.conftest import disk_full
    s = Store.open(data_dir, tiny_config(retention_bytes=3 * 8192))
    s.create_topic("t", 1, {})
    s.offsets.commit("g", "t", 0, 1, "m", 0)
    for _ in range(30):
        append(s, "t", 0, build_batch([b"x" * 1000]))
    with disk_full(s):
        for size in (1000, 100, 1):  # fill the active segment's data room to the last bytes
            try:
                while True:
                    append(s, "t", 0, build_batch([b"y" * size]))
            except StorageFull:
                pass
        first = s._log.min_position
        assert s.enforce_retention() > 0
        assert s._log.min_position > first
    assert s.offsets.fetch("g", "t", 0) == (1, "m", 0)
    _crash(s, data_dir)
    (data_dir / "checkpoint").unlink()
    s = Store.open(data_dir, tiny_config())
    assert s.offsets.fetch("g", "t", 0) == (1, "m", 0) and "t" in s.topics()
    s.close()


@pytest.mark.parametrize("start", ["clean", "crash"])
def test_after_a_restart_retention_still_carries_the_state(data_dir, start):
    """The state's record offsets read back at start must be the state queue's own: they
    were once the stored baseOffset added twice, so after a restart retention thought every
    state record lay above the deleted segments, carried none of them, and the next start
    had lost its topics and offsets (found by tests/store/test_compaction.py's crash loop)."""
    s = Store.open(data_dir, tiny_config())
    s.create_topic("data", 1, {})
    for i in range(30):
        s.offsets.commit("g", "data", 0, i, None, 0)
        append(s, "data", 0, build_batch([b"x" * 200]))
    if start == "crash":
        _crash(s, data_dir)
    else:
        s.close()
    s = Store.open(data_dir, tiny_config(retention_ms=1))
    q = s._parts[STATE_TOPIC][0].queue
    assert sorted(at for at, _ in s._view.live.values()) == [0, q.high_watermark - 1]  # the topic, the offset
    time.sleep(0.01)  # time passing on purpose: past retention.ms
    assert s.enforce_retention() > 0
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert "data" in s.topics() and s.offsets.fetch("g", "data", 0) == (29, None, 0)
    s.close()
