"""broker/groups/share_group.py and the session and state rules of broker/groups/share_coordinator.py,
sans-IO: membership epochs, the simple assignor, session expiry, share sessions' epochs, and a
share-partition's state record surviving a reload."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.groups.share_coordinator import (
    SessionError,
    ShareCoordinator,
    partition_key,
    release_delays,
    reset_duration_ms,
)
from broker.groups.share_group import Settings, ShareGroup, ShareHeartbeat, simple_assignment
from broker.groups.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    AVAILABLE,
    LIMIT_REACHED,
    REJECT,
    REJECTED,
    RELEASE,
    SharePartition,
    decode,
    encode,
)
from protocol.errors import ErrorCode

TOPICS = {"jobs": 1, "wide": 4}


def beat(member: str, epoch: int, topics=("jobs",)) -> ShareHeartbeat:
    return ShareHeartbeat(member_id=member, member_epoch=epoch, subscribed_names=topics)


def test_fewer_members_than_partitions_split_them_and_more_members_share_them():
    assert simple_assignment({"a": frozenset({"wide"}), "b": frozenset({"wide"})}, TOPICS) == {
        "a": {"wide": frozenset({0, 2})}, "b": {"wide": frozenset({1, 3})}}
    three = simple_assignment({m: frozenset({"jobs"}) for m in "abc"}, TOPICS)
    assert three == {m: {"jobs": frozenset({0})} for m in "abc"}


def test_join_heartbeat_and_leave_move_the_epochs():
    group = ShareGroup("g", Settings())
    a = group.heartbeat(0, beat("a", 0), TOPICS)
    assert (a.error, a.member_epoch, a.assignment) == (0, 1, {"jobs": frozenset({0})})
    same = group.heartbeat(10, beat("a", 1, None), TOPICS)
    assert (same.member_epoch, same.assignment) == (1, None)  # nothing changed: no assignment sent
    b = group.heartbeat(20, beat("b", 0), TOPICS)
    assert b.member_epoch == 2
    a2 = group.heartbeat(30, beat("a", 1, None), TOPICS)  # a learns the new epoch and its assignment
    assert (a2.member_epoch, a2.assignment) == (2, {"jobs": frozenset({0})})
    left = group.heartbeat(40, beat("b", -1, None), TOPICS)
    assert (left.error, left.member_epoch, group.group_epoch) == (0, -1, 3)


def test_bad_heartbeats_get_kafkas_errors():
    group = ShareGroup("g", Settings())
    assert group.heartbeat(0, beat("", 0), TOPICS).error == ErrorCode.INVALID_REQUEST
    assert group.heartbeat(0, beat("a", 0, None), TOPICS).error == ErrorCode.INVALID_REQUEST  # no subscription
    assert group.heartbeat(0, beat("ghost", 3), TOPICS).error == ErrorCode.UNKNOWN_MEMBER_ID
    group.heartbeat(0, beat("a", 0), TOPICS)
    assert group.heartbeat(0, beat("a", 7, None), TOPICS).error == ErrorCode.FENCED_MEMBER_EPOCH
    full = ShareGroup("small", Settings(max_size=1))
    full.heartbeat(0, beat("a", 0), TOPICS)
    assert full.heartbeat(0, beat("b", 0), TOPICS).error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_silent_member_expires_after_its_session_timeout():
    group = ShareGroup("g", Settings(session_timeout_ms=1000))
    group.heartbeat(0, beat("a", 0), TOPICS)
    group.heartbeat(500, beat("b", 0), TOPICS)
    assert group.next_deadline() == 1000
    assert group.expire(1000, TOPICS) == ["a"]
    assert list(group.members) == ["b"] and group.group_epoch == 3


def test_share_sessions_open_at_epoch_0_go_on_in_order_and_close_at_minus_1():
    coordinator = ShareCoordinator()
    session = coordinator.session("g", "m", 0, [("jobs", 0)], [])
    assert (session.epoch, session.partitions) == (1, {("jobs", 0)})
    with pytest.raises(SessionError) as wrong:
        coordinator.session("g", "m", 5, [], [])
    assert wrong.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert coordinator.session("g", "m", 1, [], [("jobs", 0)]).partitions == set()
    assert coordinator.session("g", "m", -1, [], []) is None
    with pytest.raises(SessionError) as gone:
        coordinator.session("g", "m", 3, [], [])
    assert gone.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    with pytest.raises(SessionError) as ack_only:
        coordinator.session("g", "m", 0, [], [], acknowledge_only=True)
    assert ack_only.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_the_state_record_keeps_acknowledged_and_redelivers_acquired():
    part = SharePartition(100, delivery_limit=5)
    part.acquire(0, "m", 10, 110)
    assert part.acknowledge(0, "m", 100, 101, [ACCEPT])
    assert part.acknowledge(0, "m", 104, 104, [RELEASE])
    again = decode(encode(part), delivery_limit=5)
    assert again.start == 102  # 100 and 101 are done
    assert [again.state(o) for o in (102, 104, 109)] == [AVAILABLE] * 3  # acquired ones come back
    assert [again.delivery_count(o) for o in (102, 104)] == [1, 1]
    assert again.state(101) == ACKNOWLEDGED
    assert partition_key("g", "t", 3) != partition_key("g", "t", 4)


def test_lock_expiry_in_the_coordinator_releases_records_with_time_passed_in():
    async def main():
        coordinator = ShareCoordinator()
        offsets = lambda topic, partition: (0, 10)  # noqa: E731
        await coordinator.set_configs("g", {"share.auto.offset.reset": "earliest",
                                            "share.record.lock.duration.ms": "2000"})
        runs = coordinator.acquire("g", "m", "jobs", 0, 5, 10, offsets)
        assert runs == [(0, 4, 1)]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(coordinator.run, lambda: {"jobs": 1})
            await trio.sleep(2.5)
            nursery.cancel_scope.cancel()
        assert coordinator.acquire("g", "n", "jobs", 0, 5, 10, offsets) == [(0, 4, 2)]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_rejected_and_spent_records_are_handed_to_the_dead_letter_writer_once():
    part = SharePartition(0, delivery_limit=2)
    part.acquire(0, "m", 3, 3)
    assert part.acknowledge(0, "m", 0, 0, [REJECT]) and part.acknowledge(0, "m", 1, 2, [RELEASE])
    assert part.take_dead() == [(0, 1, REJECTED)]
    part.acquire(1, "m", 3, 3)  # 1 and 2 again: their second delivery
    part.expire(1 + part.lock_ms)  # the lock runs out at the limit: archived
    assert part.take_dead() == [(1, 2, LIMIT_REACHED), (2, 2, LIMIT_REACHED)] and part.take_dead() == []


def test_released_records_wait_out_the_groups_retry_delay_for_their_delivery_count():
    """gregor.share.release.delay.ms=1000,5000 (RocketMQ's retry delays): a record released after its
    first delivery comes back after 1 s, after its second after 5 s, and later ones after 5 s too."""
    part = SharePartition(0, delivery_limit=5, release_delays_ms=(1000, 5000))
    assert part.acquire(0, "m", 1, 1) == [(0, 0, 1)]
    assert part.acknowledge(0, "m", 0, 0, [RELEASE])
    assert part.acquire(999, "n", 1, 1) == [] and part.next_deadline() == 1000
    assert part.acquire(1000, "n", 1, 1) == [(0, 0, 2)]
    assert part.acknowledge(2000, "n", 0, 0, [RELEASE])
    assert part.acquire(6999, "m", 1, 1) == [] and part.acquire(7000, "m", 1, 1) == [(0, 0, 3)]


def test_a_bad_retry_delay_config_is_refused():
    assert release_delays("1000, 5000") == (1000, 5000) and release_delays("") == ()
    for bad in ("soon", "-1", "1000,x"):
        with pytest.raises(ValueError):
            release_delays(bad)


@pytest.mark.parametrize("value, ms", [
    ("earliest", None), ("latest", None), ("by_duration:PT1H", 3_600_000), ("by_duration:P2D", 172_800_000),
    ("by_duration:P1DT2H3M4.5S", 93_784_500), ("by_duration:pt0.001s", 1), ("by_duration:PT1H-1M", 3_540_000),
    ("by_duration:PT0S", 0)])
def test_share_auto_offset_reset_takes_javas_iso_durations(value, ms):
    assert reset_duration_ms(value) == ms


@pytest.mark.parametrize("value", ["by_duration", "by_duration:", "by_duration:P", "by_duration:PT",
                                   "by_duration:-PT1H", "by_duration:PT-1S", "by_duration:1h", "soonest"])
def test_share_auto_offset_reset_refuses_what_kafka_refuses(value):
    with pytest.raises(ValueError):
        reset_duration_ms(value)
