"""How one member of a consumer-protocol group (KIP-848) moves from the partitions it holds to its
target assignment without ever holding a partition another member has not released yet (Kafka's
CurrentAssignmentBuilder). Sans-IO: the member's state, the target and who holds what come in as
plain values; a new MemberAssignment comes out.

The rules, as KIP-848 gives them: a member first gives up what its target no longer has (it
keeps its epoch and waits in UNREVOKED_PARTITIONS until a heartbeat says it no longer owns them);
then it takes the target's epoch and whatever of its target no other member still holds; the rest
it waits for in UNRELEASED_PARTITIONS. A member whose state is unknown (a coordinator that lost
it) must come back owning nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

Partitions = Mapping[str, frozenset[int]]  # topic name -> partition numbers


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


class FencedMember(Exception):
    """Kafka's FENCED_MEMBER_EPOCH: the member must give up its partitions and join again."""


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    state: MemberState
    epoch: int
    assigned: dict[str, frozenset[int]] = field(default_factory=dict)
    pending_revocation: dict[str, frozenset[int]] = field(default_factory=dict)

    def holds(self, topic: str, partition: int) -> bool:
        """Does the member hold the partition, as assigned or not yet revoked?"""
        return partition in self.assigned.get(topic, ()) or partition in self.pending_revocation.get(topic, ())


def _owns_any(owned: Partitions | None, wanted: Partitions) -> bool:
    """Does the member say it still owns one of `wanted`? (None: it did not say: assume it does.)"""
    if owned is None:
        return True
    return any(p in wanted.get(topic, ()) for topic, ps in owned.items() for p in ps)


def reconcile(member: MemberAssignment, target_epoch: int, target: Partitions,
              held_elsewhere: Callable[[str, int], bool], owned: Partitions | None) -> MemberAssignment:
    """The member's next assignment. `held_elsewhere(topic, partition)`: does another member still
    hold it? `owned`: the partitions the member's heartbeat says it owns (None when it said
    nothing new). Raises FencedMember for an unknown member that still owns partitions."""
    if member.state is MemberState.STABLE:
        if member.epoch == target_epoch:
            return member
        return _next(member, member.epoch, target_epoch, target, held_elsewhere, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member  # still waiting for the member to give them up
        return _next(member, member.epoch + 1, target_epoch, target, held_elsewhere, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.epoch, target_epoch, target, held_elsewhere, owned)
    if owned is None or any(owned.values()):
        raise FencedMember("the member's state is unknown: it must give up all its partitions and join again")
    return _next(member, target_epoch, target_epoch, target, held_elsewhere, owned)


def _next(member: MemberAssignment, epoch: int, target_epoch: int, target: Partitions,
          held_elsewhere: Callable[[str, int], bool], owned: Partitions | None) -> MemberAssignment:
    assigned: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    adding: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        kept = current & wanted
        if kept:
            assigned[topic] = kept
        if current - kept:
            revoking[topic] = current - kept
        free = frozenset(p for p in wanted - kept if not held_elsewhere(topic, p))
        unreleased = unreleased or len(free) < len(wanted - kept)
        if free:
            adding[topic] = free
    if revoking and _owns_any(owned, revoking):
        # give up first: same epoch, the revoked partitions named, until a heartbeat shows them gone
        return MemberAssignment(MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoking)
    for topic, ps in adding.items():
        assigned[topic] = assigned.get(topic, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return MemberAssignment(state, target_epoch, assigned, {})
