"""The store API replication is built on (issue 23, part C): a leader ships whole commitlog
entries (read_log), a follower applies them byte for byte at the same positions
(append_replicated) through the same dispatcher as an append, and a returning old leader cuts its
log back to a common position (truncate_log)."""

from __future__ import annotations

import os

import pytest

from store import Store, commitlog
from store.errors import ReplicationError, StoreError
from tests.store.conftest import append, build_batch, tiny_config
from tests.store.replicas import TOPICS, fill, make, ship


def same(leader: Store, follower: Store) -> None:
    assert follower.log_end_position == leader.log_end_position
    position = 0
    while position < leader.log_end_position:  # the same commitlog, byte for byte, at the same positions
        at, theirs = leader.read_log(position, 1 << 20)
        assert follower.read_log(position, 1 << 20) == (at, theirs)
        position = at + len(theirs)
    for name, (partitions, _) in TOPICS.items():
        for p in range(partitions):
            assert follower.high_watermark(name, p) == leader.high_watermark(name, p)
            ours = [bytes(b) for b in follower.read(name, p, follower.log_start_offset(name, p), 1 << 30).batches]
            theirs = [bytes(b) for b in leader.read(name, p, leader.log_start_offset(name, p), 1 << 30).batches]
            assert ours == theirs
    hw = leader.high_watermark("orders", 0)
    assert (follower.tag_hashes("orders", 0, 0, hw) == leader.tag_hashes("orders", 0, 0, hw)).all()


def test_a_follower_applies_shipped_entries_byte_for_byte_across_segments(tmp_path):
    leader = make(tmp_path / "leader")
    follower = make(tmp_path / "follower", follower=True)
    fill(leader, 0, 60)  # several 8 KiB segments: the follower rolls where the leader did
    ship(leader, follower)
    same(leader, follower)
    assert [h.offset for h in follower.lookup_key("users", b"u7", 0, 2**62)] == [7]  # keys: the same dispatcher
    fill(leader, 60, 10)
    ship(leader, follower, chunk=1)  # one entry at a time
    same(leader, follower)
    leader.close()
    follower.close()
    reopened = Store.open(tmp_path / "follower", tiny_config())  # what it applied survives a restart
    assert reopened.high_watermark("users", 0) == 70
    reopened.close()


def test_the_tail_read_on_the_masters_loop_is_read_log_where_it_applies_and_none_elsewhere(tmp_path):
    leader = make(tmp_path / "leader")
    fill(leader, 0, 60)  # several 8 KiB segments
    end = leader.log_end_position
    starts = []  # read_log's chunks: each within one segment
    position = leader.log_start_position
    while position < end:
        at, data = leader.read_log(position, 1 << 20)
        starts.append(at)
        position = at + len(data)
    assert len(starts) > 2
    last = starts[-1]  # the last segment's first entry: from there the rest is one segment
    assert bytes(leader.read_log_tail(last, 1 << 20)) == bytes(leader.read_log(last, 1 << 20)[1])
    first_entry = leader.read_log(last, 1)[1]
    middle = last + len(first_entry)  # an entry boundary inside the last segment
    assert middle < end
    assert bytes(leader.read_log_tail(middle, 1 << 20)) == bytes(leader.read_log(middle, 1 << 20)[1])
    assert leader.read_log_tail(starts[0], 1 << 20) is None  # past a segment's end: read_log walks it
    for max_bytes in (end - last - 1, len(first_entry), 1):  # more than max_bytes: the entries that fit, at least one
        assert bytes(leader.read_log_tail(last, max_bytes)) == bytes(leader.read_log(last, max_bytes)[1])
    assert leader.read_log_tail(end, 1 << 20) is None  # nothing more
    leader.close()


def test_the_tail_read_steps_over_a_bounded_number_of_entries_close_to_the_write_position(tmp_path, monkeypatch):
    leader = make(tmp_path / "leader")
    fill(leader, 0, 60)
    end = leader.log_end_position
    position = leader.log_start_position
    while True:  # to the last segment's first entry
        position, data = leader.read_log(position, 1 << 20)
        if leader.read_log_tail(position, 1 << 20) is not None:
            break
        position += len(data)
    ends = [position]
    for _ in range(3):  # the ends of the next three entries
        ends.append(ends[-1] + len(leader.read_log(ends[-1], 1)[1]))
    size = ends[3] - position
    three = bytes(leader.read_log(position, size)[1])
    assert len(three) == size < end - ends[3]  # more entries follow
    assert bytes(leader.read_log_tail(position, size)) == three
    monkeypatch.setattr(commitlog, "TAIL_HOPS", 4)  # three steps, and a fourth to the entry that does not fit
    assert bytes(leader.read_log_tail(position, size)) == three
    monkeypatch.setattr(commitlog, "TAIL_HOPS", 3)  # more entries than it may step over: read_log's walk
    assert leader.read_log_tail(position, size) is None
    monkeypatch.setattr(commitlog, "TAIL_HOPS", 1024)
    monkeypatch.setattr(commitlog, "TAIL_BYTES", end - position - 1)  # the write position too far ahead
    assert leader.read_log_tail(position, size) is None
    leader.close()


def test_only_chunks_without_state_records_are_applied_in_place(tmp_path):
    """applies_in_place: a follower applies data entries on its event loop; a chunk holding a
    state record (here the topics' records at the log's start) goes to a worker thread, as does
    everything while a store starts over."""
    leader = make(tmp_path / "leader")
    follower = make(tmp_path / "follower", follower=True)
    fill(leader, 0, 3)
    _, first = leader.read_log(0, 1 << 20)  # from the log's start: the topics' state records first
    assert not follower.applies_in_place(bytes(first))
    ship(leader, follower)
    fill(leader, 3, 3)
    at, data = leader.read_log(follower.log_end_position, 1 << 20)
    assert follower.applies_in_place(bytes(data))
    follower.append_replicated(at, data)
    leader.create_topic("later", 1, {})  # its state record, between data entries
    fill(leader, 6, 1)
    at, data = leader.read_log(follower.log_end_position, 1 << 20)
    assert not follower.applies_in_place(bytes(data))
    assert follower.applies_in_place(b"")
    follower.append_replicated(at, data)
    same(leader, follower)
    leader.close()
    follower.close()


def test_shipped_bytes_that_do_not_continue_the_log_are_refused_before_anything_is_written(tmp_path):
    leader = make(tmp_path / "leader")
    follower = make(tmp_path / "follower", follower=True)
    fill(leader, 0, 5)
    ship(leader, follower)
    end = follower.log_end_position
    _, data = leader.read_log(0, 1 << 20)
    with pytest.raises(ReplicationError):  # the same entries again: offsets do not continue
        follower.append_replicated(end, data)
    with pytest.raises(ReplicationError):
        follower.append_replicated(end, b"\x00" * 64)  # not entries
    with pytest.raises(ReplicationError):
        follower.append_replicated(end + 100, leader.read_log(end, 1 << 20)[1] or data)  # a gap
    assert follower.log_end_position == end and follower.high_watermark("users", 0) == 5
    leader.close()
    follower.close()


def test_truncating_a_diverged_log_then_catching_up_gives_the_leaders_log(tmp_path):
    """An old leader wrote entries the new leader never got; it cuts back to the last common
    position and pulls the new leader's log from there."""
    old = make(tmp_path / "old")
    new = make(tmp_path / "new", follower=True)
    fill(old, 0, 20)
    ship(old, new)
    common = new.log_end_position
    fill(old, 20, 5)  # written on the old leader only
    fill(new, 100, 8)  # the new leader's own writes
    with pytest.raises((ReplicationError, ValueError)):  # refused by the follower, or by the leader when
        ship(new, old)  # the follower's end is not an entry boundary of its log
    old.truncate_log(common)
    assert old.high_watermark("users", 0) == 20 and old.lookup_key("users", b"u22", 0, 2**62) == []
    ship(new, old)
    same(new, old)
    assert [h.offset for h in old.lookup_key("users", b"u101", 0, 2**62)] == [21]
    old.close()
    new.close()


# ---- a follower its leader's retention left behind starts over from a copy ----------------

def copy_from(leader: Store, follower: Store, chunk: int = 5000) -> None:
    """Broker/replication.py's start-over: the leader's bounds, an empty log from its first
    position, the leader's entries written as they come and derived once they reach its end."""
    first, end, queues = leader.replica_bounds()
    follower.start_over(first, end, queues)
    assert follower.starting_over == end and follower.log_end_position == first
    fill(leader, 1000, 6)  # appended after the bounds were taken: derived with the copy or after it
    while follower.log_end_position < leader.log_end_position:
        position, data = leader.read_log(follower.log_end_position, chunk)
        follower.append_replicated(position, data)
        copied_to = follower.starting_over
        if copied_to is not None and follower.log_end_position >= copied_to:
            follower.finish_start_over()


def retained(leader: Store) -> None:
    """Topics, offsets and a topic whose every record retention deleted; then retention runs."""
    leader.create_topic("idle", 1, {})
    for i in range(5):
        append(leader, "idle", 0, build_batch([b"i%d" % i]))
    leader.offsets.commit("readers", "orders", 1, 7)
    fill(leader, 0, 80)
    leader.offsets.commit("readers", "orders", 0, 30)
    assert leader.enforce_retention() > 0
    assert leader.log_start_position > 0
    assert leader.log_start_offset("idle", 0) == leader.high_watermark("idle", 0) == 5


def same_from_start(leader: Store, follower: Store) -> None:
    follower.replicated_to(follower.log_end_position)  # its high watermarks: what its set holds
    assert (follower.log_start_position, follower.log_end_position) == (leader.log_start_position,
                                                                        leader.log_end_position)
    position = leader.log_start_position
    while position < leader.log_end_position:  # byte for byte, at the same positions
        at, theirs = leader.read_log(position, 1 << 20)
        assert follower.read_log(position, 1 << 20) == (at, theirs)
        position = at + len(theirs)
    assert {n: (m.topic_id, m.partitions, m.configs) for n, m in follower.topics().items()} == \
        {n: (m.topic_id, m.partitions, m.configs) for n, m in leader.topics().items()}
    for name, meta in leader.topics().items():
        for p in range(meta.partitions):
            start = leader.log_start_offset(name, p)
            assert (follower.log_start_offset(name, p), follower.high_watermark(name, p)) == \
                (start, leader.high_watermark(name, p)), (name, p)
            ours = [bytes(b) for b in follower.read(name, p, start, 1 << 30).batches]
            assert ours == [bytes(b) for b in leader.read(name, p, start, 1 << 30).batches]
    assert follower.offsets.fetch_group("readers") == leader.offsets.fetch_group("readers")
    for key in (b"u79", b"u1003"):  # keys: indexed from the copy
        assert [h.offset for h in follower.lookup_key("users", key, 0, 2**62)] == \
            [h.offset for h in leader.lookup_key("users", key, 0, 2**62)] != []


def test_a_follower_behind_the_leaders_retention_starts_over_from_a_copy_and_derives_it(tmp_path):
    leader = make(tmp_path / "leader")
    leader_config = tiny_config(retention_bytes=4 * 8192)
    leader.close()
    leader = Store.open(tmp_path / "leader", leader_config)
    follower = make(tmp_path / "follower", follower=True)
    try:
        fill(leader, 2000, 3)
        ship(leader, follower)  # it had the log's start, then stopped following
        retained(leader)
        assert follower.log_end_position < leader.log_start_position
        with pytest.raises(StoreError):  # only a follower discards its log for its master's
            follower.start_over(*leader.replica_bounds())
        follower.replicate(following=True)
        copy_from(leader, follower, chunk=3000)
        assert follower.starting_over is None and not (tmp_path / "follower" / "start_over").exists()
        same_from_start(leader, follower)
        fill(leader, 3000, 4)  # derived as they come, as before
        ship(leader, follower)
        same_from_start(leader, follower)
        follower.close()
        follower = Store.open(tmp_path / "follower", tiny_config())  # the copy survives a restart as it is
        same_from_start(leader, follower)
    finally:
        leader.close()
        follower.close()


def test_a_restart_while_starting_over_discards_the_partial_copy(tmp_path):
    leader = Store.open(tmp_path / "leader", tiny_config(retention_bytes=4 * 8192))
    follower = make(tmp_path / "follower", follower=True)
    try:
        for name, (partitions, configs) in TOPICS.items():
            leader.create_topic(name, partitions, configs)
        retained(leader)
        follower.replicate(following=True)
        first, end, queues = leader.replica_bounds()
        follower.start_over(first, end, queues)
        position, data = leader.read_log(first, 3000)
        follower.append_replicated(position, data)  # part of it: not derived
        assert follower.topics() == {}
        follower.close()
        follower = Store.open(tmp_path / "follower", tiny_config())
        assert (follower.log_start_position, follower.log_end_position) == (0, 0)  # asks for the copy again
        assert follower.topics() == {} and not (tmp_path / "follower" / "start_over").exists()
    finally:
        leader.close()
        follower.close()


def _splice(leader: Store, follower: Store, chunk: int) -> int:
    """Ship like a follower with splice: the bytes written at splice_target's place first, then
    applied in order with apply_spliced; where it gives no place (a roll), append_replicated.
    Returns how many chunks went into the file straight."""
    straight = 0
    while follower.log_end_position < leader.log_end_position:
        position, data = leader.read_log(follower.log_end_position, chunk)
        target = follower.splice_target(position, len(data))
        if target is None:
            follower.append_replicated(position, data)
            continue
        fd, offset = target
        assert os.pwrite(fd, data, offset) == len(data)  # what the splice(2) from the socket does
        follower.apply_spliced(position, len(data))
        straight += 1
    return straight


def test_bytes_spliced_into_the_file_are_checked_and_derived_as_shipped_ones_are(tmp_path):
    leader = make(tmp_path / "leader")
    follower = make(tmp_path / "follower", follower=True)
    fill(leader, 0, 60)  # several 8 KiB segments: at each roll the bytes take append_replicated's way
    straight = _splice(leader, follower, 3000)
    rolls = len(leader._log.segments) - 1
    assert rolls >= 3 and straight > rolls
    same(leader, follower)
    assert [h.offset for h in follower.lookup_key("users", b"u7", 0, 2**62)] == [7]
    leader.close()
    follower.close()
    reopened = Store.open(tmp_path / "follower", tiny_config())
    assert reopened.high_watermark("users", 0) == 60
    reopened.close()


def _caught_up(tmp_path) -> tuple[Store, Store, int]:
    """A leader with 5 rounds of batches and a follower that holds them all, and its log's end."""
    leader = make(tmp_path / "leader")
    follower = make(tmp_path / "follower", follower=True)
    fill(leader, 0, 5)
    ship(leader, follower)
    return leader, follower, follower.log_end_position


def test_spliced_bytes_that_do_not_continue_the_log_move_nothing_and_are_zeroed_when_discarded(tmp_path):
    leader, follower, end = _caught_up(tmp_path)
    _, data = leader.read_log(0, 1 << 20)
    data = bytes(data[:min(len(data), 4000)])
    fd, offset = follower.splice_target(end, len(data))
    os.pwrite(fd, data, offset)  # the same entries again: their offsets do not continue this log
    with pytest.raises(ReplicationError):
        follower.apply_spliced(end, len(data))
    assert follower.log_end_position == end and follower.high_watermark("users", 0) == 5
    assert os.pread(fd, len(data), offset) == data
    follower.discard_spliced()  # the stream ended: what was never applied is zeroed
    assert os.pread(fd, len(data), offset) == bytes(len(data))
    assert follower.splice_target(end - 1, 10) is None  # before the write position: no place
    fill(leader, 5, 5)
    assert _splice(leader, follower, 1 << 20) >= 1  # the log goes on where it ended
    same(leader, follower)
    leader.close()
    follower.close()


def test_closing_the_store_zeroes_spliced_bytes_never_applied(tmp_path):
    leader, follower, end = _caught_up(tmp_path)
    fill(leader, 5, 3)
    at, data = leader.read_log(end, 1 << 20)
    fd, offset = follower.splice_target(at, len(data))
    os.pwrite(fd, data, offset)
    follower.close()  # a clean stop: the bytes past the log's end go, not left for a later recovery
    reopened = Store.open(tmp_path / "follower", tiny_config())
    assert reopened.log_end_position == end and reopened.high_watermark("users", 0) == 5
    path, start, _ = reopened.log_segment_file(end)
    with open(path, "rb") as f:  # zeroed: a crash after the next master's shorter entries there would take them
        f.seek(end - start)
        assert f.read(len(data)) == bytes(len(data))
    assert _splice(leader, reopened, 1 << 20) == 1
    same(leader, reopened)
    leader.close()
    reopened.close()
