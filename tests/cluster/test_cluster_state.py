"""The broker group's decisions, sans-IO (broker/cluster/state.py): who claims, leads, follows
or waits given ZooKeeper's snapshot; the group record's encoding; where a returning follower's
log stops agreeing with its master's; and the master's view of its sync-state set."""

from __future__ import annotations

import json

from broker.cluster.state import (
    Claim,
    Follow,
    GroupRecord,
    Lead,
    Snapshot,
    SyncState,
    Wait,
    decide,
    truncation_point,
)


def snap(live: set[int], record: GroupRecord | None, version: int = 4) -> Snapshot:
    return Snapshot(frozenset(live), record, version if record is not None else -1)


# ---- decide ------------------------------------------------------------------------------

def test_first_node_claims_epoch_1_alone_in_the_set():
    action = decide(7, snap({7, 8}, None), None)
    assert action == Claim(GroupRecord(7, 1, (7,)), -1)


def test_first_node_claims_even_if_it_believes_it_leads():
    # no record: whatever this node thinks, only a create (version -1) may make it master
    assert decide(3, snap({3}, None), 2) == Claim(GroupRecord(3, 1, (3,)), -1)


def test_recorded_master_leading_the_recorded_epoch_leads():
    rec = GroupRecord(1, 4, (1, 2, 3))
    assert decide(1, snap({1, 2, 3}, rec, version=9), 4) == Lead(4)


def test_recorded_master_that_restarted_claims_the_next_epoch_at_the_same_version():
    rec = GroupRecord(1, 4, (1, 2, 3))
    assert decide(1, snap({1, 2, 3}, rec, version=9), None) == Claim(GroupRecord(1, 5, (1, 2, 3)), 9)


def test_recorded_master_leading_an_older_epoch_claims_the_next_one():
    rec = GroupRecord(1, 4, (1, 2))
    assert decide(1, snap({1, 2}, rec, version=2), 3) == Claim(GroupRecord(1, 5, (1, 2)), 2)


def test_restarted_master_missing_from_its_own_set_puts_itself_back():
    rec = GroupRecord(1, 4, (2, 3))
    action = decide(1, snap({1}, rec, version=6), None)
    assert action == Claim(GroupRecord(1, 5, (1, 2, 3)), 6)


def test_a_live_master_is_followed_even_by_a_node_in_the_set():
    rec = GroupRecord(2, 3, (1, 2))
    assert decide(1, snap({1, 2}, rec), None) == Follow(2, 3)


def test_a_live_master_is_followed_by_a_node_outside_the_set():
    rec = GroupRecord(2, 3, (2,))
    assert decide(5, snap({2, 5}, rec), None) == Follow(2, 3)


def test_a_node_that_led_before_follows_the_live_recorded_master():
    # a deposed master (still believing it leads epoch 3) follows the master of epoch 4
    rec = GroupRecord(2, 4, (1, 2))
    assert decide(1, snap({1, 2}, rec), 3) == Follow(2, 4)


def test_set_member_claims_the_next_epoch_without_the_gone_master_at_the_snapshot_version():
    rec = GroupRecord(2, 3, (1, 2, 3))
    action = decide(1, snap({1, 3}, rec, version=11), None)
    assert action == Claim(GroupRecord(1, 4, (1, 3)), 11)


def test_last_set_member_claims_alone_when_the_master_is_gone():
    rec = GroupRecord(2, 3, (1, 2))
    assert decide(1, snap({1}, rec, version=0), None) == Claim(GroupRecord(1, 4, (1,)), 0)


def test_node_outside_the_set_waits_when_the_master_is_gone_naming_the_master():
    rec = GroupRecord(2, 3, (2, 3))
    action = decide(1, snap({1, 3}, rec), None)
    assert isinstance(action, Wait)
    assert "master 2" in action.reason
    assert "node 1" in action.reason


# ---- GroupRecord -------------------------------------------------------------------------

def test_group_record_round_trips_through_json_with_the_set_sorted():
    rec = GroupRecord(2, 7, (3, 1, 2))
    data = rec.encode()
    obj = json.loads(data)
    assert obj == {"version": 1, "master": 2, "epoch": 7, "sync_state_set": [1, 2, 3]}
    assert GroupRecord.decode(data) == GroupRecord(2, 7, (1, 2, 3))


def test_group_record_with_a_sorted_set_decodes_to_itself():
    rec = GroupRecord(10, 1, (4, 10, 12))
    assert GroupRecord.decode(rec.encode()) == rec


def test_group_record_decodes_string_numbers_and_unsorted_sets():
    data = json.dumps({"version": 1, "master": "3", "epoch": "2", "sync_state_set": [5, "3", 1]}).encode()
    assert GroupRecord.decode(data) == GroupRecord(3, 2, (1, 3, 5))


def test_with_set_keeps_master_and_epoch_and_sorts_the_new_set():
    rec = GroupRecord(1, 6, (1, 2, 3))
    assert rec.with_set({3, 1}) == GroupRecord(1, 6, (1, 3))
    assert rec.with_set(frozenset({9, 1, 4})) == GroupRecord(1, 6, (1, 4, 9))
    assert rec == GroupRecord(1, 6, (1, 2, 3))  # frozen: the original is unchanged


# ---- truncation_point ------------------------------------------------------------------------

def test_same_epoch_truncates_to_the_follower_end_when_it_is_behind():
    assert truncation_point([(1, 0), (2, 100)], 300, 2, 250) == 250


def test_same_epoch_truncates_to_the_master_end_when_the_follower_is_ahead():
    assert truncation_point([(1, 0), (2, 100)], 300, 2, 420) == 300


def test_older_epoch_ends_where_the_masters_next_epoch_starts():
    epochs = [(1, 0), (2, 100), (3, 200)]
    assert truncation_point(epochs, 900, 2, 500) == 200
    assert truncation_point(epochs, 900, 1, 500) == 100


def test_follower_behind_in_an_older_epoch_keeps_its_end():
    epochs = [(1, 0), (2, 100), (3, 200)]
    assert truncation_point(epochs, 900, 1, 60) == 60
    assert truncation_point(epochs, 900, 2, 150) == 150


def test_an_epoch_the_master_never_had_ends_at_the_masters_next_epoch():
    assert truncation_point([(1, 0), (3, 500)], 1200, 2, 900) == 500


def test_follower_with_no_epoch_yet_truncates_to_the_masters_first_epoch_start():
    # a follower that only holds what came before any master epoch (epoch 0)
    assert truncation_point([(1, 40), (2, 100)], 300, 0, 90) == 40


# ---- SyncState ---------------------------------------------------------------------------

def test_hw_position_is_the_least_member_position_counting_unfetched_members_as_0():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2, 3}), lag_ms=1000, now_ms=0)
    s.fetched(2, 100, 500, 10)
    assert s.hw_position(500) == 0  # node 3 never fetched
    s.fetched(3, 80, 500, 20)
    assert s.hw_position(500) == 80
    s.fetched(3, 400, 500, 30)
    assert s.hw_position(500) == 100


def test_hw_position_never_passes_the_log_end():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=1000, now_ms=0)
    s.fetched(2, 700, 700, 10)
    assert s.hw_position(500) == 500
    alone = SyncState(me=1, sync_state_set=frozenset({1}), lag_ms=1000, now_ms=0)
    assert alone.hw_position(321) == 321


def test_hw_position_ignores_followers_outside_the_set():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=1000, now_ms=0)
    s.fetched(2, 300, 300, 10)
    s.fetched(3, 5, 300, 10)  # connected, far behind, not a member
    assert s.hw_position(300) == 300


def test_hw_position_counts_a_member_missing_from_followers_as_0():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=1000, now_ms=0)
    s.followers.pop(2)
    assert s.hw_position(300) == 0


def test_drained_once_every_member_with_an_open_stream_holds_the_log_end():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2, 3}), lag_ms=1000, now_ms=0)
    assert s.drained(500)  # no member connected since the election: none is waited for
    s.fetched(2, 500, 500, 10)
    s.fetched(3, 400, 500, 10)
    assert not s.drained(500)
    s.disconnected(3)  # its stream closed: stopping or gone
    assert s.drained(500)
    s.fetched(3, 450, 500, 20)  # back, behind
    assert not s.drained(500)
    s.fetched(4, 0, 500, 20)  # connected, not a member
    s.fetched(3, 500, 500, 30)
    assert s.drained(500)
    assert not s.drained(501)


def test_a_member_that_has_not_caught_up_within_lag_ms_leaves_the_set():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=1000, now_ms=0)
    s.fetched(2, 0, 500, 100)  # first fetch: caught up with the log end of its previous (none)
    s.fetched(2, 200, 700, 200)  # short of 500, the log end at its previous fetch
    assert s.wanted_set(700, 1100) == frozenset({1, 2})  # 1000 ms since it caught up: still in
    assert s.wanted_set(700, 1101) == frozenset({1})


def test_a_member_gone_from_zookeeper_with_its_stream_closed_leaves_the_set_at_once():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2, 3}), lag_ms=1000, now_ms=0)
    s.fetched(2, 500, 500, 10)
    s.fetched(3, 500, 500, 10)
    assert s.wanted_set(500, 20, live={1, 2}) == frozenset({1, 2, 3})  # its session ended, its stream is open
    s.disconnected(3)
    assert s.wanted_set(500, 20, live={1, 2, 3}) == frozenset({1, 2, 3})  # live: it may reconnect within lag_ms
    assert s.wanted_set(500, 20, live={1, 2}) == frozenset({1, 2})
    assert s.wanted_set(500, 20, live={2}) == frozenset({1, 2})  # the master itself stays


def test_a_member_that_caught_up_recently_stays_in_the_set():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=1000, now_ms=0)
    s.fetched(2, 0, 500, 100)
    s.fetched(2, 500, 800, 900)  # holds the log end of its previous fetch
    assert s.wanted_set(800, 1500) == frozenset({1, 2})
    assert s.wanted_set(800, 1901) == frozenset({1})


def test_a_connected_non_member_holding_the_hw_position_joins():
    s = SyncState(me=1, sync_state_set=frozenset({1, 3}), lag_ms=1000, now_ms=0)
    s.fetched(3, 200, 300, 10)
    s.fetched(2, 200, 300, 20)  # holds everything below the hw position (200)
    assert s.hw_position(300) == 200
    assert s.wanted_set(300, 30) == frozenset({1, 2, 3})


def test_a_connected_non_member_below_the_hw_position_does_not_join():
    s = SyncState(me=1, sync_state_set=frozenset({1, 3}), lag_ms=1000, now_ms=0)
    s.fetched(3, 200, 300, 10)
    s.fetched(2, 199, 300, 20)
    assert s.wanted_set(300, 30) == frozenset({1, 3})


def test_a_disconnected_non_member_does_not_join():
    s = SyncState(me=1, sync_state_set=frozenset({1}), lag_ms=1000, now_ms=0)
    s.fetched(2, 300, 300, 10)
    assert s.wanted_set(300, 20) == frozenset({1, 2})  # connected: it would join
    s.disconnected(2)
    assert s.wanted_set(300, 20) == frozenset({1})


def test_disconnecting_an_unknown_node_changes_nothing():
    s = SyncState(me=1, sync_state_set=frozenset({1}), lag_ms=1000, now_ms=0)
    s.disconnected(9)
    assert 9 not in s.followers
    assert s.wanted_set(0, 10) == frozenset({1})


def test_the_master_itself_is_never_dropped():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=10, now_ms=0)
    assert s.wanted_set(10_000, 10**9) == frozenset({1})
    assert 1 not in s.followers  # the master keeps no progress of its own


def test_a_member_after_an_election_gets_lag_ms_of_grace_from_construction():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2, 3}), lag_ms=1000, now_ms=5000)
    assert s.followers[2].caught_up_ms == 5000 and s.followers[2].position == 0
    assert not s.followers[2].connected
    assert s.wanted_set(400, 6000) == frozenset({1, 2, 3})
    s.fetched(3, 400, 400, 5500)
    assert s.wanted_set(400, 6001) == frozenset({1, 3})  # node 2 never fetched: its grace is over


# ---- the caught-up rule ----------------------------------------------------------------------

def test_fetched_marks_caught_up_only_from_the_log_end_of_the_previous_fetch():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2}), lag_ms=1000, now_ms=0)
    s.fetched(2, 0, 100, 10)
    assert s.followers[2].caught_up_ms == 10  # no previous fetch: log end 0 seen
    s.fetched(2, 50, 200, 20)
    assert s.followers[2].caught_up_ms == 10  # 50 < 100
    s.fetched(2, 150, 300, 30)
    assert s.followers[2].caught_up_ms == 10  # 150 < 200, the log end seen at the previous fetch
    s.fetched(2, 200, 300, 40)
    assert s.followers[2].caught_up_ms == 10  # 200 < 300 (the previous fetch saw 300)
    s.fetched(2, 300, 450, 50)
    assert s.followers[2].caught_up_ms == 50
    assert s.followers[2].position == 300 and s.followers[2].previous_log_end == 450


def test_fetched_connects_and_records_the_position():
    s = SyncState(me=1, sync_state_set=frozenset({1}), lag_ms=1000, now_ms=0)
    s.fetched(4, 120, 200, 7)
    p = s.followers[4]
    assert p.connected and p.position == 120 and p.caught_up_ms == 7 and p.previous_log_end == 200


def test_a_member_asking_again_from_a_lower_position_counts_with_that_position():
    s = SyncState(me=1, sync_state_set=frozenset({1, 2, 3}), lag_ms=1000, now_ms=0)
    s.fetched(2, 500, 500, 10)
    s.fetched(3, 300, 500, 10)
    assert s.hw_position(500) == 300
    s.disconnected(2)
    s.fetched(2, 250, 500, 20)  # reconnected: holds only the commitlog below 250 now
    s.fetched(3, 500, 500, 30)
    assert s.hw_position(500) == 250
