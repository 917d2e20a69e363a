"""A share-partition's record states (KIP-932, broker/groups/share_partition.py) with the time passed
in: acquisition locks, ACCEPT/RELEASE/REJECT/RENEW, redelivery with a count, archiving past the
delivery limit, the window's start moving, a member leaving, and what survives a restart."""

from __future__ import annotations

import numpy as np

from broker.groups.share_partition import (
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, REJECT, RELEASE, RENEW, SharePartition)


def test_two_members_get_different_records_and_accepted_ones_never_come_back():
    part = SharePartition(0, lock_ms=30000)
    a = part.acquire(0, "a", 5, fetchable_end=10)
    b = part.acquire(0, "b", 5, fetchable_end=10)
    assert (a, b) == ([(0, 4, 1)], [(5, 9, 1)])
    assert part.acknowledge(1, "a", 0, 4, [ACCEPT]) and part.start == 5
    assert not part.acknowledge(1, "a", 5, 9, [ACCEPT])  # b's records: INVALID_RECORD_STATE
    assert part.acquire(2, "a", 5, fetchable_end=10) == []  # nothing available: 5-9 are b's


def test_released_records_come_back_with_their_delivery_count_and_rejected_ones_never():
    part = SharePartition(0, delivery_limit=3)
    part.acquire(0, "a", 3, fetchable_end=3)
    assert part.acknowledge(1, "a", 0, 2, [RELEASE, REJECT, ACCEPT])
    assert (part.state(0), part.state(1), part.state(2)) == (AVAILABLE, ARCHIVED, ACKNOWLEDGED)
    assert part.acquire(2, "b", 10, fetchable_end=3) == [(0, 0, 2)]  # delivered a second time
    part.acknowledge(3, "b", 0, 0, [RELEASE])
    assert part.acquire(4, "b", 10, fetchable_end=3) == [(0, 0, 3)]
    part.acknowledge(5, "b", 0, 0, [RELEASE])  # the third delivery was the last: archived
    assert part.start == 3 and part.acquire(6, "b", 10, fetchable_end=3) == []  # done: the window moved past it


def test_a_lock_that_runs_out_makes_the_records_available_and_renew_extends_it():
    part = SharePartition(0, lock_ms=1000)
    part.acquire(0, "a", 4, fetchable_end=4)
    assert part.acknowledge(900, "a", 2, 3, [RENEW])  # 2-3 locked again until 1900
    assert part.expire(1000) == 2 and [part.state(o) for o in range(4)] == [AVAILABLE, AVAILABLE, ACQUIRED, ACQUIRED]
    assert part.acquire(1001, "b", 10, fetchable_end=4) == [(0, 1, 2)]
    assert part.expire(1900) == 2 and part.next_deadline() == 2001


def test_the_window_holds_at_most_max_in_flight_records():
    part = SharePartition(100, max_in_flight=3)
    assert part.acquire(0, "a", 10, fetchable_end=1000) == [(100, 102, 1)]
    part.acknowledge(1, "a", 100, 100, [ACCEPT])
    assert part.acquire(2, "a", 10, fetchable_end=1000) == [(103, 103, 1)]


def test_a_member_that_leaves_gives_its_records_back():
    part = SharePartition(0)
    part.acquire(0, "a", 3, fetchable_end=3)
    assert part.release_member("a") == 3 and part.acquire(1, "b", 3, fetchable_end=3) == [(0, 2, 2)]


def test_the_durable_form_keeps_counts_and_makes_acquired_records_available_again():
    part = SharePartition(0, delivery_limit=5)
    part.acquire(0, "a", 6, fetchable_end=6)
    part.acknowledge(1, "a", 0, 1, [ACCEPT])
    part.acknowledge(1, "a", 3, 3, [RELEASE])
    part.acknowledge(1, "a", 4, 4, [REJECT])
    start, runs = part.durable()
    assert (start, runs) == (2, [(2, 3, AVAILABLE, 1), (4, 4, ARCHIVED, 1), (5, 5, AVAILABLE, 1)])
    back = SharePartition.load(start, runs, delivery_limit=5)
    assert back.acquire(10, "b", 10, fetchable_end=6) == [(2, 3, 2), (5, 5, 2)]
    assert back.state(4) == ARCHIVED


def test_a_million_in_flight_records_cost_about_a_megabyte():
    part = SharePartition(0, max_in_flight=1_000_000)
    part.acquire(0, "a", 1_000_000, fetchable_end=1_000_000)
    assert part.in_flight() == 1_000_000 and part._window.nbytes == 1_000_000
    assert len(part.acquisitions) == 1 and part.state(999_999) == ACQUIRED
    assert isinstance(part._window, np.ndarray)


def test_aborted_records_acquired_for_a_read_committed_group_are_archived_never_delivered():
    part = SharePartition(0, lock_ms=30000)
    assert part.acquire(0, "a", 10, fetchable_end=9) == [(0, 8, 1)]
    part.archive_aborted("a", 3, 5)  # an aborted transaction's batch
    assert [part.state(o) for o in range(9)] == [ACQUIRED] * 3 + [ARCHIVED] * 3 + [ACQUIRED] * 3
    assert not part.acknowledge(1, "a", 3, 3, [ACCEPT])  # not the member's to acknowledge any more
    assert part.acknowledge(1, "a", 0, 2, [ACCEPT]) and part.start == 6  # past the archived ones
    part.expire(60_000)  # the lock runs out: 6-8 come back, 3-5 never
    assert part.acquire(60_001, "b", 10, fetchable_end=9) == [(6, 8, 2)]
