"""KIP-848's member reconciliation (broker/groups/reconcile.py) and server-side assignors
(broker/groups/assignors.py), with plain values: a partition moves from one member to another
only after the first gave it up, and the assignors balance and keep partitions where they are."""

from __future__ import annotations

import pytest

from broker.groups.assignors import range_assignor, uniform_assignor
from broker.groups.reconcile import FencedMember, MemberAssignment, MemberState, reconcile

ALL = frozenset(range(6))


def _nobody(topic, partition):
    return False


def test_a_new_member_takes_its_target_at_the_targets_epoch():
    joined = MemberAssignment(MemberState.STABLE, 0)
    got = reconcile(joined, 1, {"t": ALL}, _nobody, owned={})
    assert (got.state, got.epoch, got.assigned, got.pending_revocation) == (MemberState.STABLE, 1, {"t": ALL}, {})


def test_a_partition_changes_hands_only_after_its_holder_revoked_it():
    a = MemberAssignment(MemberState.STABLE, 1, {"t": ALL})
    b = MemberAssignment(MemberState.STABLE, 0)
    target = {"a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3, 4, 5})}}

    def held_by(other):
        return lambda topic, p: other.holds(topic, p)

    a = reconcile(a, 2, target["a"], held_by(b), owned={"t": ALL})  # a must give 3-5 up first
    assert (a.state, a.epoch, a.assigned, a.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 1, {"t": frozenset({0, 1, 2})}, {"t": frozenset({3, 4, 5})})
    b = reconcile(b, 2, target["b"], held_by(a), owned={})  # 3-5 still held by a: b waits at epoch 2
    assert (b.state, b.epoch, b.assigned) == (MemberState.UNRELEASED_PARTITIONS, 2, {})
    assert reconcile(a, 2, target["a"], held_by(b), owned={"t": ALL}) == a  # no heartbeat without them yet
    a = reconcile(a, 2, target["a"], held_by(b), owned={"t": frozenset({0, 1, 2})})
    assert (a.state, a.epoch, a.assigned, a.pending_revocation) == (MemberState.STABLE, 2, {"t": frozenset({0, 1, 2})}, {})
    b = reconcile(b, 2, target["b"], held_by(a), owned={})
    assert (b.state, b.epoch, b.assigned) == (MemberState.STABLE, 2, {"t": frozenset({3, 4, 5})})


def test_a_member_of_unknown_state_must_come_back_owning_nothing():
    lost = MemberAssignment(MemberState.UNKNOWN, 3, {"t": ALL})
    with pytest.raises(FencedMember):
        reconcile(lost, 4, {"t": ALL}, _nobody, owned={"t": frozenset({1})})
    assert reconcile(lost, 4, {"t": ALL}, _nobody, owned={}).state is MemberState.STABLE


def test_uniform_splits_evenly_and_keeps_partitions_where_they_are():
    first = uniform_assignor({"a": {"t"}}, {"t": 6})
    assert first == {"a": {"t": ALL}}
    second = uniform_assignor({"a": {"t"}, "b": {"t"}}, {"t": 6}, first)
    assert len(second["a"]["t"]) == len(second["b"]["t"]) == 3 and second["a"]["t"] | second["b"]["t"] == ALL
    third = uniform_assignor({"a": {"t"}, "b": {"t"}, "c": {"t"}}, {"t": 6}, second)
    assert sorted(len(third[m]["t"]) for m in "abc") == [2, 2, 2]
    assert third["a"]["t"] <= second["a"]["t"] and third["b"]["t"] <= second["b"]["t"]  # only moves to c
    assert uniform_assignor({"b": {"t"}, "c": {"t"}}, {"t": 6}, third)["b"]["t"] >= third["b"]["t"]


def test_uniform_balances_different_subscriptions_as_far_as_they_allow():
    got = uniform_assignor({"a": {"x", "y"}, "b": {"y"}}, {"x": 4, "y": 4})
    assert got["a"]["x"] == frozenset(range(4)) and "x" not in got["b"]
    assert len(got["b"]["y"]) == 4 and "y" not in got["a"]  # a has 4 of x already: b takes y
    lopsided = uniform_assignor({"a": {"x"}, "b": {"y"}}, {"x": 1, "y": 5})
    assert lopsided == {"a": {"x": frozenset({0})}, "b": {"y": frozenset(range(5))}}


def test_range_gives_contiguous_ranges_in_member_order_for_co_partitioning():
    got = range_assignor({"m2": {"t", "u"}, "m1": {"t", "u"}, "m3": {"t"}}, {"t": 7, "u": 4})
    assert got["m1"] == {"t": frozenset({0, 1, 2}), "u": frozenset({0, 1})}
    assert got["m2"] == {"t": frozenset({3, 4}), "u": frozenset({2, 3})}
    assert got["m3"] == {"t": frozenset({5, 6})}
    assert range_assignor({"m": set()}, {"t": 3}) == {"m": {}}
