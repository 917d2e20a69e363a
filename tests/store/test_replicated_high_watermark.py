"""The store's replication bookkeeping (store/replica.py and Store.replicate / replicated_to /
begin_master_epoch): once a store takes part in a broker group its high watermarks move only as
far as the replicas hold the commitlog, master epochs are state records replicated like any
other, and a follower writes nothing of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocol.record_batch import parse_header
from store import Store
from store.compaction import CleanStats
from tests.store.conftest import append, build_batch, segment_names, tiny_config
from tests.store.replicas import TOPICS, fill, make, ship


@pytest.fixture
def leader(tmp_path) -> Iterator[Store]:
    s = make(tmp_path / "leader")
    yield s
    s.close()


@pytest.fixture
def follower(tmp_path) -> Iterator[Store]:
    s = make(tmp_path / "follower", follower=True)
    yield s
    s.close()


def batch(i: int) -> bytes:
    return build_batch([b"v%d" % i, b"w%d" % i])


def offsets_read(s: Store, topic: str, partition: int) -> list[int]:
    """Base offsets of the batches a consumer reading from the log start gets."""
    result = s.read(topic, partition, s.log_start_offset(topic, partition), 1 << 30)
    return [parse_header(b).base_offset for b in result.batches]


# ---- the high watermark waits for the replicas --------------------------------------------

def test_after_replicate_appends_stay_unreadable_until_replicated_to_their_end(leader):
    append(leader, "orders", 0, batch(0))
    leader.replicate(following=False)
    assert leader.following is False
    assert leader.high_watermark("orders", 0) == 2  # what was there before stays readable
    result = append(leader, "orders", 0, batch(1))
    assert result.end_position == leader.log_end_position
    assert leader.log_end_offset("orders", 0) == 4
    assert leader.high_watermark("orders", 0) == 2
    assert offsets_read(leader, "orders", 0) == [0]
    at_hw = leader.read("orders", 0, 2, 1 << 20)
    assert at_hw.batches == [] and at_hw.high_watermark == 2
    leader.replicated_to(result.end_position - 1)  # one byte short of the entry's end
    assert leader.high_watermark("orders", 0) == 2
    leader.replicated_to(result.end_position)
    assert leader.high_watermark("orders", 0) == leader.log_end_offset("orders", 0) == 4
    assert offsets_read(leader, "orders", 0) == [0, 2]
    assert leader.read("orders", 0, 2, 1 << 20).high_watermark == 4


def test_replicating_to_the_middle_moves_only_the_partition_written_below_it(leader):
    leader.replicate(following=False)
    first = append(leader, "orders", 0, batch(0))
    second = append(leader, "orders", 1, batch(1))
    assert first.end_position < second.end_position
    leader.replicated_to(first.end_position)
    assert leader.high_watermark("orders", 0) == 2
    assert leader.high_watermark("orders", 1) == 0 < leader.log_end_offset("orders", 1)
    assert offsets_read(leader, "orders", 1) == []
    leader.replicated_to(second.end_position)
    assert leader.high_watermark("orders", 1) == 2
    assert offsets_read(leader, "orders", 1) == [0]


def test_replicated_to_never_moves_a_high_watermark_back(leader):
    leader.replicate(following=False)
    first = append(leader, "orders", 0, batch(0))
    second = append(leader, "orders", 0, batch(1))
    leader.replicated_to(second.end_position)
    leader.replicated_to(first.end_position)
    assert leader.high_watermark("orders", 0) == 4


def test_replicated_to_wakes_append_subscribers_of_the_partitions_that_moved(leader):
    leader.replicate(following=False)
    woken: list[tuple[str, int]] = []
    first = append(leader, "orders", 0, batch(0))
    append(leader, "orders", 1, batch(1))
    leader.subscribe_appends(woken.extend)
    leader.replicated_to(first.end_position)
    assert woken == [("orders", 0)]


def test_a_store_that_never_replicates_keeps_the_high_watermark_at_the_log_end(leader):
    for i in range(5):
        append(leader, "orders", i % 2, batch(i))
        assert leader.high_watermark("orders", i % 2) == leader.log_end_offset("orders", i % 2)
    assert leader.following is False
    assert offsets_read(leader, "orders", 0) == [0, 2, 4]
    leader.replicated_to(0)  # without replicate(): nothing to do
    assert leader.high_watermark("orders", 0) == 6


def test_partitions_of_a_topic_created_after_replicate_wait_for_replication_too(leader):
    leader.replicate(following=False)
    leader.create_topic("late", 1, {})
    result = append(leader, "late", 0, batch(0))
    assert leader.high_watermark("late", 0) == 0 and leader.log_end_offset("late", 0) == 2
    leader.replicated_to(result.end_position)
    assert leader.high_watermark("late", 0) == 2


def test_replicate_after_unreplicated_appends_waits_for_the_whole_present_log(leader):
    leader.replicate(following=False)
    append(leader, "orders", 0, batch(0))
    leader.replicate(following=False)  # a change of role: pending until the log end is replicated
    assert leader.high_watermark("orders", 0) == 0
    leader.replicated_to(leader.log_end_position)
    assert leader.high_watermark("orders", 0) == 2


# ---- master epochs -----------------------------------------------------------------------

def test_begin_master_epoch_records_its_start_and_leads_every_partition_in_it(leader):
    append(leader, "orders", 0, batch(0))
    assert leader.master_epochs() == []
    end = leader.log_end_position
    start = leader.begin_master_epoch(5)
    assert start == end
    assert leader.master_epochs() == [(5, start)]
    append(leader, "orders", 1, batch(1))
    assert leader.leader_epoch("orders", 1) == 5
    assert leader.leader_epoch("orders", 0) == 5
    (stored,) = leader.read("orders", 1, 0, 1 << 20).batches
    assert parse_header(stored).partition_leader_epoch == 5
    leader.create_topic("later", 2, {})
    assert leader.leader_epoch("later", 0) == leader.leader_epoch("later", 1) == 5


def test_master_epochs_are_listed_oldest_first(leader):
    first = leader.begin_master_epoch(2)
    append(leader, "orders", 0, batch(0))
    second = leader.begin_master_epoch(7)
    assert first < second
    assert leader.master_epochs() == [(2, first), (7, second)]
    assert leader.leader_epoch("orders", 0) == 7


def test_master_epochs_survive_a_restart(tmp_path):
    s = make(tmp_path / "leader")
    start = s.begin_master_epoch(3)
    append(s, "orders", 0, batch(0))
    s.close()
    reopened = Store.open(tmp_path / "leader", tiny_config())
    try:
        assert reopened.master_epochs() == [(3, start)]
        assert reopened.leader_epoch("orders", 0) == 3
    finally:
        reopened.close()


# ---- a follower writes nothing of its own ------------------------------------------------

def test_a_follower_deletes_no_segment_where_a_master_would(tmp_path):
    s = Store.open(tmp_path / "s", tiny_config(retention_bytes=3 * 8192))
    try:
        s.create_topic("t", 2, {})
        for i in range(40):
            append(s, "t", i % 2, build_batch([bytes([i]) * 600]))
        s.replicate(following=True)
        assert s.following is True
        before = segment_names(tmp_path / "s")
        assert s.enforce_retention() == 0
        assert segment_names(tmp_path / "s") == before
        assert s.log_start_offset("t", 0) == 0
        s.replicate(following=False)  # the same store as master: retention deletes
        assert s.following is False
        assert s.enforce_retention() > 0
        assert s.log_start_offset("t", 0) > 0
    finally:
        s.close()


def test_a_follower_runs_no_log_cleaner_where_a_master_would(tmp_path):
    s = Store.open(tmp_path / "s", tiny_config(cleaner_enable=False, segment_bytes=1 << 16,
                                               queue_entries_per_file=64))
    try:
        s.create_topic("c", 1, {"cleanup.policy": "compact", "key.index.enable": "false"})
        for i in range(0, 80, 4):
            append(s, "c", 0, build_batch([b"v%d" % (i + j) for j in range(4)],
                                          keys=[b"k%d" % ((i + j) % 3) for j in range(4)]))
        s.replicate(following=True)
        end = s.log_end_position
        assert s.clean(force=True) == CleanStats()
        assert s.log_end_position == end  # nothing relocated
        s.replicate(following=False)
        assert s.clean(force=True).records_removed > 0
    finally:
        s.close()


def test_a_follower_fed_from_its_leader_moves_its_high_watermark_by_replicated_to(leader, follower):
    leader.replicate(following=False)
    follower.replicate(following=True)
    fill(leader, 0, 6)
    ship(leader, follower)
    assert follower.log_end_position == leader.log_end_position
    for name, (partitions, _) in TOPICS.items():
        for p in range(partitions):
            assert follower.log_end_offset(name, p) == leader.log_end_offset(name, p) > 0
            assert follower.high_watermark(name, p) == 0
    assert follower.read("users", 0, 0, 1 << 20).batches == []
    follower.replicated_to(follower.log_end_position)
    for name, (partitions, _) in TOPICS.items():
        for p in range(partitions):
            assert follower.high_watermark(name, p) == follower.log_end_offset(name, p)
    assert len(follower.read("users", 0, 0, 1 << 30).batches) == 6


def test_a_follower_moves_only_what_the_shipped_position_covers(leader, follower):
    follower.replicate(following=True)
    fill(leader, 0, 2)
    ship(leader, follower)
    middle = follower.log_end_position
    fill(leader, 2, 2)
    ship(leader, follower)
    follower.replicated_to(middle)
    assert follower.high_watermark("users", 0) == 2
    assert follower.log_end_offset("users", 0) == 4
    follower.replicated_to(follower.log_end_position)
    assert follower.high_watermark("users", 0) == 4


def test_a_follower_learns_the_master_epochs_from_the_shipped_record(leader, follower):
    follower.replicate(following=True)
    fill(leader, 0, 3)
    ship(leader, follower)
    assert follower.master_epochs() == []
    start = leader.begin_master_epoch(5)
    fill(leader, 3, 3)
    ship(leader, follower)
    assert leader.master_epochs() == [(5, start)]
    assert follower.master_epochs() == leader.master_epochs()
