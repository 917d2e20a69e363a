"""The consumer-protocol group (KIP-848, broker/groups/consumer_group.py) driven by heartbeats with
the time passed in: joining, a hand-over that revokes before it assigns, leaving, session and
revocation timeouts, fenced epochs, static members, regex subscriptions, new partitions."""

from __future__ import annotations

from broker.groups.consumer_group import ConsumerGroup, Heartbeat, Settings
from protocol.errors import ErrorCode

TOPICS = {"orders": 6}
ALL = frozenset(range(6))


def beat(member: str, epoch: int, owned=None, **fields) -> Heartbeat:
    return Heartbeat(member_id=member, member_epoch=epoch, owned=owned, **fields)


def joined(group: ConsumerGroup, member: str, now: int = 0, topics=TOPICS, **fields):
    fields.setdefault("subscribed_names", ("orders",))
    return group.heartbeat(now, beat(member, 0, owned={}, **fields), topics)


def test_a_second_member_gets_half_only_after_the_first_revoked_it():
    group = ConsumerGroup("g", Settings())
    first = joined(group, "m1")
    assert (first.error, first.member_epoch, first.assignment) == (0, 1, {"orders": ALL})
    second = joined(group, "m2", now=10)
    assert (second.member_epoch, second.assignment, group.state) == (2, {}, "reconciling")
    asked = group.heartbeat(20, beat("m1", 1, owned={"orders": ALL}), TOPICS)
    kept = asked.assignment["orders"]
    assert asked.member_epoch == 1 and len(kept) == 3  # still epoch 1: it must give the rest up first
    assert group.heartbeat(25, beat("m2", 2, owned={}), TOPICS).assignment is None  # nothing released yet
    done = group.heartbeat(30, beat("m1", 1, owned={"orders": kept}), TOPICS)
    assert (done.member_epoch, done.assignment) == (2, None)
    taken = group.heartbeat(40, beat("m2", 2, owned={}), TOPICS)
    assert (taken.member_epoch, taken.assignment) == (2, {"orders": ALL - kept})
    assert group.state == "stable"


def test_a_member_that_leaves_hands_its_partitions_back_and_a_silent_one_times_out():
    group = ConsumerGroup("g", Settings(session_timeout_ms=45000))
    joined(group, "m1")
    joined(group, "m2")
    group.heartbeat(1, beat("m1", 1, owned={"orders": ALL}), TOPICS)
    m1 = group.members["m1"].assignment.assigned["orders"]
    group.heartbeat(2, beat("m1", 1, owned={"orders": m1}), TOPICS)
    group.heartbeat(3, beat("m2", 2, owned={}), TOPICS)
    left = group.heartbeat(4, beat("m2", -1), TOPICS)
    assert (left.error, left.member_epoch) == (0, -1) and set(group.members) == {"m1"}
    back = group.heartbeat(5, beat("m1", 2, owned={"orders": m1}), TOPICS)
    assert back.assignment == {"orders": ALL} and back.member_epoch == group.group_epoch
    assert group.next_deadline() == 5 + 45000
    assert group.expire(5 + 44999) == [] and group.expire(5 + 45000) == ["m1"]
    assert group.state == "empty"


def test_a_member_that_does_not_give_partitions_up_within_its_rebalance_timeout_is_removed():
    group = ConsumerGroup("g", Settings())
    joined(group, "m1", rebalance_timeout_ms=1000)
    joined(group, "m2", now=100)
    group.heartbeat(200, beat("m1", 1, owned={"orders": ALL}), TOPICS)  # told to revoke at 200
    assert group.expire(1199) == [] and group.expire(1200) == ["m1"]


def test_epochs_are_checked_and_a_lost_answer_is_forgiven():
    group = ConsumerGroup("g", Settings())
    joined(group, "m1")
    assert group.heartbeat(1, beat("m1", 7), TOPICS).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert group.heartbeat(1, beat("nobody", 1), TOPICS).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.heartbeat(1, beat("", 0, subscribed_names=("orders",)), TOPICS).error == ErrorCode.INVALID_REQUEST
    joined(group, "m2")
    kept = group.heartbeat(2, beat("m1", 1, owned={"orders": ALL}), TOPICS).assignment["orders"]
    assert group.heartbeat(3, beat("m1", 1, owned={"orders": kept}), TOPICS).member_epoch == 2
    # the answer that gave epoch 2 was lost: the previous epoch, owning no more than assigned, is fine
    assert group.heartbeat(4, beat("m1", 1, owned={"orders": kept}), TOPICS).error == 0
    assert group.heartbeat(5, beat("m1", 1, owned={"orders": ALL}), TOPICS).error == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance():
    group = ConsumerGroup("g", Settings())
    joined(group, "a1", instance_id="host-a")
    joined(group, "b1", instance_id="host-b")
    a_kept = group.heartbeat(1, beat("a1", 1, owned={"orders": ALL}), TOPICS).assignment["orders"]
    group.heartbeat(2, beat("a1", 1, owned={"orders": a_kept}), TOPICS)
    group.heartbeat(3, beat("b1", 2, owned={}), TOPICS)
    epoch = group.group_epoch
    refused = joined(group, "a2", now=4, instance_id="host-a")  # a1 has not left
    assert refused.error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert group.heartbeat(5, beat("a1", -2), TOPICS).member_epoch == -2  # a rolling restart
    back = joined(group, "a2", now=6, instance_id="host-a")
    assert (back.error, back.assignment, group.group_epoch) == (0, {"orders": a_kept}, epoch)
    assert "a1" not in group.members and group.static["host-a"] == "a2"


def test_a_regex_subscription_follows_the_topics_that_match():
    group = ConsumerGroup("g", Settings())
    topics = {"orders-eu": 2, "orders-us": 1, "orders": 3, "__consumer_offsets": 50}
    got = group.heartbeat(0, beat("m", 0, owned={}, subscribed_regex="orders-.*"), topics)
    assert got.assignment == {"orders-eu": frozenset({0, 1}), "orders-us": frozenset({0})}
    topics["orders-uk"] = 1  # a new matching topic: a new group epoch and a new assignment
    more = group.heartbeat(1, beat("m", got.member_epoch, owned=got.assignment), topics)
    assert more.member_epoch == got.member_epoch + 1 and "orders-uk" in more.assignment
    bad = group.heartbeat(2, beat("x", 0, owned={}, subscribed_regex="orders-(("), topics)
    assert bad.error == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_more_partitions_on_a_subscribed_topic_move_the_group_epoch():
    group = ConsumerGroup("g", Settings())
    first = joined(group, "m1")
    grown = group.heartbeat(1, beat("m1", first.member_epoch, owned={"orders": ALL}), {"orders": 8})
    assert grown.member_epoch == first.member_epoch + 1 and grown.assignment == {"orders": frozenset(range(8))}


def test_an_unknown_assignor_is_refused_and_range_can_be_chosen():
    group = ConsumerGroup("g", Settings())
    assert joined(group, "m1", server_assignor="sticky").error == ErrorCode.UNSUPPORTED_ASSIGNOR
    joined(group, "m1", server_assignor="range")
    joined(group, "m2", server_assignor="range")
    assert group.target == {"m1": {"orders": frozenset({0, 1, 2})}, "m2": {"orders": frozenset({3, 4, 5})}}


def test_the_durable_form_brings_back_epochs_members_and_assignments_with_fresh_timers():
    from broker.groups.consumer_group import durable, load
    group = ConsumerGroup("g", Settings(session_timeout_ms=45000))
    joined(group, "m1", instance_id="host-1", rebalance_timeout_ms=1000)
    joined(group, "m2", subscribed_regex="ord.*", subscribed_names=None)
    group.heartbeat(5, beat("m1", 1, owned={"orders": ALL}), TOPICS)  # m1 now revoking
    back = load("g", group.settings, durable(group), now_ms=100_000)
    assert durable(back) == durable(group)
    m1, m2 = back.members["m1"], back.members["m2"]
    assert (m1.assignment, m1.previous_epoch, back.static) == (group.members["m1"].assignment, 0, {"host-1": "m1"})
    assert (m2.subscribed_regex, m2.assignment.epoch) == ("ord.*", 2)
    assert m1.session_deadline_ms == 145_000 and m1.revoke_deadline_ms == 101_000
    assert (back.group_epoch, back.assignment_epoch, back.target) == (group.group_epoch, group.assignment_epoch,
                                                                       group.target)
