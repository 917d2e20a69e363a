"""One share group's membership (KIP-932, Kafka's ShareGroup and the share half of its
GroupMetadataManager): members that heartbeat with their subscriptions, a group epoch that moves
when members, subscriptions or the subscribed topics' partitions change, and the simple
assignor's answer for that epoch. Unlike a consumer group nothing is revoked first: a partition
may be read by several members at once, each record going to one of them (broker/groups/
share_partition.py), so every member takes its new assignment on its next heartbeat.
Sans-IO: every event takes `now_ms`; broker/groups/share_coordinator.py feeds it heartbeats and
calls `expire(now_ms)` when `next_deadline()` passes. Membership is not durable, as in Kafka: after
a restart members join again (their records' locks are gone with them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

LEAVE_EPOCH = -1
ASSIGNOR = "simple"  # Kafka's only share-group assignor (org.apache.kafka.coordinator.group.assignor.SimpleAssignor)


@dataclass(frozen=True, slots=True)
class Settings:
    """Kafka's group.share.* membership settings (defaults as Kafka 4.4's)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_names: tuple[str, ...] | None = None  # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareAnswer:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[str, frozenset[int]] | None = None  # None: unchanged since the last answer


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: frozenset[str] = frozenset()
    epoch: int = 0
    assignment: dict[str, frozenset[int]] = field(default_factory=dict)
    session_deadline_ms: int = 0


def simple_assignment(members: Mapping[str, frozenset[str]], topics: Mapping[str, int]) -> dict[str, dict[str, frozenset[int]]]:
    """Every subscribed partition to at least one of its subscribers, as evenly as it goes: with
    fewer subscribers than partitions each partition has one reader and the readers take turns;
    with more, each reader has one partition and the partitions take turns (Kafka's
    SimpleAssignor balances the same two counts). Deterministic: sorted members and partitions."""
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    rotation = 0
    for topic in sorted({t for subs in members.values() for t in subs}):
        count = topics.get(topic, 0)
        readers = sorted(m for m, subs in members.items() if topic in subs)
        if not count or not readers:
            continue
        pairs = ([(readers[(i + rotation) % len(readers)], i) for i in range(count)] if len(readers) <= count
                 else [(m, (j + rotation) % count) for j, m in enumerate(readers)])
        for member, partition in pairs:
            out[member].setdefault(topic, set()).add(partition)
        rotation += count
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


class ShareGroup:
    def __init__(self, group_id: str, settings: Settings) -> None:
        self.group_id = group_id
        self.settings = settings
        self.members: dict[str, ShareMember] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.partitions_seen: dict[str, int] = {}  # what the assignment was computed from

    @property
    def state(self) -> str:
        """Kafka's ShareGroup states: empty, stable."""
        return "stable" if self.members else "empty"

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed)

    def heartbeat(self, now_ms: int, beat: ShareHeartbeat, topics: Mapping[str, int]) -> ShareAnswer:
        """One member's ShareGroupHeartbeat; `topics`: every topic's partition count."""
        if not beat.member_id:
            return ShareAnswer(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if beat.member_epoch == LEAVE_EPOCH:
            member = self.members.pop(beat.member_id, None)
            if member is None:
                return ShareAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {beat.member_id} is not a member of group {self.group_id}.")
            self._bump(topics)
            return ShareAnswer(member_id=beat.member_id, member_epoch=LEAVE_EPOCH)
        member = self.members.get(beat.member_id)
        if beat.member_epoch == 0:
            if member is None:
                if not beat.subscribed_names:
                    return ShareAnswer(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
                if len(self.members) >= self.settings.max_size:
                    return ShareAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                       f"The share group has reached its maximum capacity of {self.settings.max_size} members.")
                member = self.members[beat.member_id] = ShareMember(beat.member_id, beat.rack_id, beat.client_id,
                                                                    beat.client_host)
            member.subscribed = frozenset()  # a rejoin: its subscription is the one it sends now
        elif member is None:
            return ShareAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {beat.member_id} is not a member of group {self.group_id}.")
        elif beat.member_epoch != member.epoch:
            return ShareAnswer(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The share group member has a member epoch ({beat.member_epoch}) different from "
                               f"the one known by the group coordinator ({member.epoch}).")
        member.session_deadline_ms = now_ms + self.settings.session_timeout_ms
        if beat.rack_id is not None:
            member.rack_id = beat.rack_id
        changed = beat.member_epoch == 0
        if beat.subscribed_names is not None and frozenset(beat.subscribed_names) != member.subscribed:
            member.subscribed = frozenset(beat.subscribed_names)
            changed = True
        if changed or self._partitions_changed(topics):
            self._bump(topics)
        sent = None
        if member.epoch != self.group_epoch or beat.member_epoch != self.group_epoch:
            member.epoch = self.group_epoch
            sent = member.assignment
        return ShareAnswer(member_id=member.member_id, member_epoch=member.epoch,
                           heartbeat_interval_ms=self.settings.heartbeat_interval_ms, assignment=sent)

    def _partitions_changed(self, topics: Mapping[str, int]) -> bool:
        return any(topics.get(t, 0) != self.partitions_seen.get(t, 0) for t in self.subscribed_topics())

    def _bump(self, topics: Mapping[str, int]) -> None:
        """A new group epoch and its assignment: each member takes it on its next heartbeat."""
        self.group_epoch += 1
        self.partitions_seen = {t: topics.get(t, 0) for t in self.subscribed_topics()}
        target = simple_assignment({m.member_id: m.subscribed for m in self.members.values()}, topics)
        for member in self.members.values():
            member.assignment = target.get(member.member_id, {})
        self.assignment_epoch = self.group_epoch

    def assigned(self, member_id: str, topic: str, partition: int) -> bool:
        member = self.members.get(member_id)
        return member is not None and partition in member.assignment.get(topic, ())

    # ---- time -----------------------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        return min((m.session_deadline_ms for m in self.members.values()), default=None)

    def expire(self, now_ms: int, topics: Mapping[str, int]) -> list[str]:
        """Remove the members whose session ran out; their ids (their records are released)."""
        gone = [m for m, member in self.members.items() if member.session_deadline_ms <= now_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self._bump(topics)
        return gone
