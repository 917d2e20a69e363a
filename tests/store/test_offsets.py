"""OffsetStore: committed consumer-group offsets survive reopen, crashes and torn tails."""

from __future__ import annotations

from store.offsets import OffsetStore


def test_commit_and_fetch_round_trip(tmp_path):
    o = OffsetStore(tmp_path / "offsets.log")
    o.commit("g", "t", 0, 42, "meta", 3)
    o.commit("g", "t", 0, 43, None, 4)
    o.commit("h", "u", 1, 7)
    assert o.fetch("g", "t", 0) == (43, None, 4)
    assert o.fetch("g", "t", 1) is None
    assert sorted(o.groups()) == ["g", "h"]
    o.close()
    o = OffsetStore(tmp_path / "offsets.log")
    assert o.fetch("g", "t", 0) == (43, None, 4)
    assert o.fetch("h", "u", 1) == (7, "", -1)
    o.close()


def test_delete_group_is_durable(tmp_path):
    o = OffsetStore(tmp_path / "offsets.log")
    o.commit_many("g", [("t", 0, 1, "", -1), ("t", 1, 2, "", -1)])
    o.delete_group("g")
    o.close()
    o = OffsetStore(tmp_path / "offsets.log")
    assert o.groups() == [] and o.fetch("g", "t", 0) is None
    o.close()


def test_torn_tail_is_truncated_and_earlier_commits_kept(tmp_path):
    path = tmp_path / "offsets.log"
    o = OffsetStore(path)
    o.commit("g", "t", 0, 1)
    o.commit("g", "t", 1, 2)
    o.close()
    raw = path.read_bytes()
    path.write_bytes(raw[:-5])  # the second record is torn
    o = OffsetStore(path)
    assert o.fetch("g", "t", 0) == (1, "", -1)
    assert o.fetch("g", "t", 1) is None
    o.commit("g", "t", 1, 9)
    o.close()
    o = OffsetStore(path)
    assert o.fetch("g", "t", 1) == (9, "", -1)
    o.close()


def test_corrupt_record_ends_replay(tmp_path):
    path = tmp_path / "offsets.log"
    o = OffsetStore(path)
    o.commit("g", "t", 0, 1)
    o.commit("g", "t", 0, 2)
    o.close()
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(raw)
    o = OffsetStore(path)
    assert o.fetch("g", "t", 0) == (1, "", -1)
    o.close()


def test_replay_compacts_superseded_commits(tmp_path):
    path = tmp_path / "offsets.log"
    o = OffsetStore(path)
    for i in range(100):
        o.commit("g", "t", 0, i)
    o.close()
    size = path.stat().st_size
    o = OffsetStore(path)
    assert path.stat().st_size < size / 50
    assert o.fetch("g", "t", 0) == (99, "", -1)
    o.close()
