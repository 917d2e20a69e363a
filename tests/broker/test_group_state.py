"""The group state machine on its own: events in, transitions and answers out.

Time is the `now` passed to every event, so each test moves the clock by hand;
there are no sleeps and no event loop.
"""

from __future__ import annotations

import pytest

from broker.groups.state import (
    ALLOWED_FROM,
    Group,
    GroupState,
    IllegalTransition,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from protocol.errors import ErrorCode

DELAY = 3000
SESSION = 10_000
REBALANCE = 20_000


class Replies:
    """Collects what the group answers a waiting member."""

    def __init__(self) -> None:
        self.got: list[JoinResult | SyncResult] = []

    def __call__(self, result) -> None:
        self.got.append(result)

    @property
    def last(self):
        return self.got[-1] if self.got else None


def request(member_id: str = "", protocols=(("range", b"r"),), instance_id: str | None = None,
            session: int = SESSION, rebalance: int = REBALANCE, protocol_type: str = "consumer",
            known_id_required: bool = True) -> JoinRequest:
    return JoinRequest(member_id, instance_id, "client", "/127.0.0.1", session, rebalance, protocol_type,
                       tuple(protocols), known_id_required)


def join(group: Group, now: float, member_id: str = "", **kw) -> Replies:
    replies = Replies()
    group.join(now, request(member_id, **kw), replies)
    return replies


def sync(group: Group, now: float, member_id: str, assignments: dict[str, bytes] | None = None,
         generation: int | None = None) -> Replies:
    replies = Replies()
    group.sync(now, member_id, None, group.generation_id if generation is None else generation, None, None,
               assignments or {}, replies)
    return replies


def new_member(group: Group, now: float, **kw) -> tuple[str, Replies]:
    """The two-step v4+ join: MEMBER_ID_REQUIRED, then the rejoin with the given id."""
    first = join(group, now, **kw)
    assert first.last.error == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.last.member_id
    return member_id, join(group, now, member_id, **kw)


def settle(group: Group) -> float:
    """Fire deadlines until the rebalance completes; returns the time it completed."""
    now = 0.0
    while group.state is GroupState.PREPARING_REBALANCE:
        now = group.next_deadline()
        group.expire(now)
    return now


def stable_group(n: int = 1) -> tuple[Group, list[str], float]:
    group = Group("g", DELAY)
    ids = [new_member(group, 0)[0] for _ in range(n)]
    now = settle(group)
    assert group.state is GroupState.COMPLETING_REBALANCE
    for member_id in ids:
        sync(group, now, member_id, {m: m.encode() for m in ids} if member_id == group.leader_id else None)
    assert group.state is GroupState.STABLE
    return group, ids, now


def test_new_group_is_empty_at_generation_zero():
    group = Group("g", DELAY)
    assert (group.state, group.generation_id, group.next_deadline()) == (GroupState.EMPTY, 0, None)


def test_join_without_member_id_requires_one_and_keeps_group_empty():
    group = Group("g", DELAY)
    replies = join(group, 0)
    assert replies.last.error == ErrorCode.MEMBER_ID_REQUIRED
    assert replies.last.member_id.startswith("client-")
    assert replies.last.generation_id == -1
    assert group.state is GroupState.EMPTY and not group.members


def test_old_join_versions_get_a_member_id_without_the_round_trip():
    group = Group("g", 0)
    replies = join(group, 0, known_id_required=False)
    group.expire(0)
    assert replies.last.error == ErrorCode.NONE and replies.last.member_id.startswith("client-")


def test_first_rebalance_waits_for_the_initial_delay():
    group = Group("g", DELAY)
    member_id, replies = new_member(group, 0)
    assert group.state is GroupState.PREPARING_REBALANCE
    group.expire(DELAY - 1)
    assert replies.last is None
    assert group.next_deadline() == DELAY
    group.expire(DELAY)
    result = replies.last
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert (result.error, result.generation_id, result.leader, result.protocol_name) == (0, 1, member_id, "range")
    assert [m.member_id for m in result.members] == [member_id]


def test_member_joining_during_initial_delay_extends_it_up_to_the_rebalance_timeout():
    group = Group("g", DELAY)
    _, first = new_member(group, 0, rebalance=2 * DELAY)
    _, second = new_member(group, 1000, rebalance=2 * DELAY)
    group.expire(DELAY)
    assert group.state is GroupState.PREPARING_REBALANCE and first.last is None
    group.expire(2 * DELAY)
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert first.last.generation_id == second.last.generation_id == 1


def test_only_the_leader_receives_member_metadata():
    group = Group("g", DELAY)
    a, ra = new_member(group, 0, protocols=(("range", b"meta-a"),))
    b, rb = new_member(group, 0, protocols=(("range", b"meta-b"),))
    settle(group)
    leader, follower = (ra, rb) if group.leader_id == a else (rb, ra)
    assert {(m.member_id, m.metadata) for m in leader.last.members} == {(a, b"meta-a"), (b, b"meta-b")}
    assert follower.last.members == () and follower.last.leader == group.leader_id


def test_protocol_is_chosen_by_vote_among_protocols_all_members_support():
    group = Group("g", 0)
    new_member(group, 0, protocols=(("roundrobin", b""), ("range", b"")))
    new_member(group, 0, protocols=(("range", b""), ("roundrobin", b""), ("sticky", b"")))
    new_member(group, 0, protocols=(("sticky", b""), ("range", b""), ("roundrobin", b"")))
    settle(group)
    assert group.protocol_name == "range"


def test_join_with_no_common_protocol_or_other_type_is_inconsistent():
    group, _, now = stable_group()
    assert join(group, now, protocols=(("sticky", b""),)).last.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(group, now, protocol_type="connect").last.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert group.state is GroupState.STABLE


def test_sync_gives_each_member_its_own_assignment_once_the_leader_syncs():
    group = Group("g", DELAY)
    a, _ = new_member(group, 0)
    b, _ = new_member(group, 0)
    now = settle(group)
    leader = group.leader_id
    follower = b if leader == a else a
    waiting = sync(group, now, follower)
    assert waiting.last is None
    done = sync(group, now, leader, {a: b"for-a", b: b"for-b"})
    assert group.state is GroupState.STABLE
    assert done.last.assignment == (b"for-a" if leader == a else b"for-b")
    assert waiting.last.assignment == (b"for-b" if leader == a else b"for-a")
    assert sync(group, now, follower).last.assignment == waiting.last.assignment


def test_sync_errors_for_wrong_generation_unknown_member_and_during_rebalance():
    group, (a,), now = stable_group()
    assert sync(group, now, a, generation=7).last.error == ErrorCode.ILLEGAL_GENERATION
    assert sync(group, now, "nobody").last.error == ErrorCode.UNKNOWN_MEMBER_ID
    new_member(group, now)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert sync(group, now, a).last.error == ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeat_answers_by_state():
    group = Group("g", DELAY)
    a, _ = new_member(group, 0)
    assert group.heartbeat(0, a, None, 0) == ErrorCode.REBALANCE_IN_PROGRESS
    group.expire(DELAY)
    assert group.heartbeat(DELAY, a, None, 1) == ErrorCode.NONE  # CompletingRebalance
    sync(group, DELAY, a, {a: b""})
    assert group.heartbeat(DELAY, a, None, 1) == ErrorCode.NONE  # Stable
    assert group.heartbeat(DELAY, a, None, 2) == ErrorCode.ILLEGAL_GENERATION
    assert group.heartbeat(DELAY, "", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_new_member_moves_stable_group_to_rebalance_which_completes_when_all_rejoin():
    group, (a,), now = stable_group()
    _, b_replies = new_member(group, now)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(now, a, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    a_replies = join(group, now, a)  # all known members have rejoined: no waiting for the timeout
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert a_replies.last.generation_id == b_replies.last.generation_id == 2


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    group, (a, b), now = stable_group(2)
    c_id, c_replies = new_member(group, now)
    a_replies = join(group, now + 1000, a)
    for t in range(int(now), int(now) + REBALANCE, SESSION // 2):  # b stays alive but never rejoins
        assert group.heartbeat(t, b, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        group.expire(t)
    assert group.state is GroupState.PREPARING_REBALANCE
    group.expire(now + REBALANCE)
    assert set(group.members) == {a, c_id}
    assert a_replies.last.generation_id == c_replies.last.generation_id == 2


def test_session_expiry_removes_a_silent_member_and_rebalances():
    group, (a, b), now = stable_group(2)
    for t in range(int(now), int(now) + 3 * SESSION, SESSION // 2):
        group.heartbeat(t, a, None, 1)
        group.expire(t)
    assert b not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(now + 3 * SESSION, a, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeats_keep_a_member_alive_past_its_session_timeout():
    group, (a,), now = stable_group()
    for t in range(int(now), int(now) + 5 * SESSION, SESSION // 3):
        assert group.heartbeat(t, a, None, 1) == ErrorCode.NONE
        group.expire(t)
    assert group.state is GroupState.STABLE


def test_last_member_leaving_empties_the_group_and_bumps_the_generation():
    group, (a,), now = stable_group()
    assert group.leave(now, a, None) == ErrorCode.NONE
    assert (group.state, group.generation_id, group.protocol_type) == (GroupState.EMPTY, 2, "consumer")
    assert group.leave(now, a, None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.heartbeat(now, a, None, 2) == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_during_completing_rebalance_fails_waiting_syncs_with_rebalance_in_progress():
    group = Group("g", DELAY)
    a, _ = new_member(group, 0)
    b, _ = new_member(group, 0)
    now = settle(group)
    follower = b if group.leader_id == a else a
    waiting = sync(group, now, follower)
    group.leave(now, group.leader_id, None)
    assert waiting.last.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.leader_id == follower


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout():
    group = Group("g", DELAY)
    new_member(group, 0)
    new_member(group, 0)
    now = settle(group)
    leader = group.leader_id
    sync(group, now, leader, {})
    for t in range(int(now), int(now) + REBALANCE + 1, SESSION // 2):
        group.heartbeat(t, leader, None, 1)
        group.expire(t)
    assert set(group.members) == {leader}
    assert group.state is GroupState.PREPARING_REBALANCE


def test_unclaimed_member_id_expires_after_the_session_timeout():
    group = Group("g", DELAY)
    first = join(group, 0)
    pending = first.last.member_id
    group.expire(SESSION)
    assert join(group, SESSION, pending).last.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_offset_commit_rules_by_state():
    group = Group("g", DELAY)
    assert group.validate_commit(0, "", None, -1) == ErrorCode.NONE  # simple commit on an Empty group
    a, _ = new_member(group, 0)
    assert group.validate_commit(0, a, None, 0) == ErrorCode.NONE  # PreparingRebalance
    group.expire(DELAY)
    assert group.validate_commit(DELAY, a, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    sync(group, DELAY, a, {a: b""})
    assert group.validate_commit(DELAY, a, None, 1) == ErrorCode.NONE
    assert group.validate_commit(DELAY, a, None, 5) == ErrorCode.ILLEGAL_GENERATION
    assert group.validate_commit(DELAY, "x", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_commit(DELAY, "", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_rejoining_a_stable_group_keeps_generation_and_fences_old_id():
    group = Group("g", DELAY)
    first = join(group, 0, instance_id="host-1")
    old_id = group.static_members["host-1"]
    group.expire(DELAY)
    assert first.last.error == ErrorCode.NONE
    sync(group, DELAY, old_id, {old_id: b"mine"})
    again = join(group, DELAY + 10, instance_id="host-1")
    new_id = again.last.member_id
    assert new_id != old_id and group.state is GroupState.STABLE and again.last.generation_id == 1
    assert sync(group, DELAY + 10, new_id).last.assignment == b"mine"
    assert group.heartbeat(DELAY + 10, old_id, "host-1", 1) == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_leaving_by_instance_id():
    group = Group("g", 0)
    join(group, 0, instance_id="host-1")
    group.expire(0)
    assert group.leave(0, "", "host-1") == ErrorCode.NONE
    assert group.state is GroupState.EMPTY


def test_transition_table_refuses_illegal_moves():
    group = Group("g", DELAY)
    with pytest.raises(IllegalTransition):
        group.transition_to(GroupState.STABLE)
    assert GroupState.EMPTY in ALLOWED_FROM[GroupState.PREPARING_REBALANCE]
    assert ALLOWED_FROM[GroupState.STABLE] == {GroupState.COMPLETING_REBALANCE}


def test_dead_group_refuses_everything():
    group, (a,), now = stable_group()
    group.leave(now, a, None)
    group.kill()
    assert group.state is GroupState.DEAD
    assert join(group, now).last.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert group.heartbeat(now, a, None, 2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
