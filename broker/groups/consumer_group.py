"""One consumer-protocol group (KIP-848, Kafka's ConsumerGroup and the heartbeat half of its
GroupMetadataManager): members that heartbeat with their subscriptions, a group epoch that moves
when subscriptions, members or the subscribed topics' partitions change, a target assignment
computed by a server-side assignor for that epoch, and each member reconciled towards its share
(broker/groups/reconcile.py). Sans-IO: every event takes `now_ms`; the coordinator
(broker/groups/coordinator.py) feeds it ConsumerGroupHeartbeats (broker/handlers/consumer_groups.py),
calls `expire(now_ms)` when `next_deadline()` passes, and writes `durable()` to the commitlog's
state topic whenever it changes, so a restart or a new master loads the group (`load`) with its
epochs, members and assignments, each member's session timer started again (as Kafka's
coordinator does when it loads its partition of __consumer_offsets)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from broker.groups.assignors import ASSIGNORS
from broker.groups.reconcile import FencedMember, MemberAssignment, MemberState, Partitions, reconcile
from protocol.errors import ErrorCode

LEAVE_EPOCH = -1  # a member leaving the group
STATIC_LEAVE_EPOCH = -2  # a static member leaving for now: its partitions wait for it a session long


@dataclass(frozen=True, slots=True)
class Settings:
    """Kafka's group.consumer.* settings (defaults as Kafka 4's)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat's fields; None: unchanged since the member's last heartbeat."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[str, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[str, frozenset[int]] | None = None  # None: unchanged since the last answer


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    """What the JoinGroup of a member speaking the classic protocol said (a classic group's member
    taken over by an online upgrade, or one joining a consumer-protocol group: broker/groups/classic_members.py)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, ConsumerProtocolSubscription), its order of preference


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_names: frozenset[str] = frozenset()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300000
    assignment: MemberAssignment = field(default_factory=lambda: MemberAssignment(MemberState.STABLE, 0))
    previous_epoch: int = -1
    session_deadline_ms: int = 0
    revoke_deadline_ms: int | None = None  # while it has partitions to give up
    sent: dict[str, frozenset[int]] | None = None  # the assignment last answered
    classic: ClassicProtocol | None = None  # a member speaking the classic protocol
    join_deadline_ms: int | None = None  # classic: told to rejoin, it must within its rebalance timeout
    sync_deadline_ms: int | None = None  # classic: joined, it must send SyncGroup within its rebalance timeout


class ConsumerGroup:
    def __init__(self, group_id: str, settings: Settings) -> None:
        self.group_id = group_id
        self.settings = settings
        self.members: dict[str, Member] = {}
        self.static: dict[str, str] = {}  # instance id -> member id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, dict[str, frozenset[int]]] = {}
        self.subscribed_partitions: dict[str, int] = {}  # what the target was computed from

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup states: empty, assigning, reconciling, stable."""
        if not self.members:
            return "empty"
        if self.assignment_epoch != self.group_epoch:
            return "assigning"
        if any(m.assignment.epoch != self.assignment_epoch or m.assignment.state is not MemberState.STABLE
               for m in self.members.values()):
            return "reconciling"
        return "stable"

    # ---- heartbeats ------------------------------------------------------------------------------------
    def heartbeat(self, now_ms: int, beat: Heartbeat, topics: Mapping[str, int]) -> Answer:
        """One member's heartbeat; `topics`: every topic's partition count (for subscriptions)."""
        if beat.member_epoch == LEAVE_EPOCH or beat.member_epoch == STATIC_LEAVE_EPOCH:
            return self._leave(now_ms, beat)
        if not beat.member_id:
            return Answer(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if beat.server_assignor is not None and beat.server_assignor not in self.settings.assignors:
            return Answer(ErrorCode.UNSUPPORTED_ASSIGNOR,
                          f"ServerAssignor {beat.server_assignor} is not supported. Supported assignors: "
                          f"{', '.join(self.settings.assignors)}.")
        if beat.subscribed_regex is not None:
            try:
                re.compile(beat.subscribed_regex)
            except re.error as exc:
                return Answer(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {exc}")
        member = self.members.get(beat.member_id)
        new = False
        if beat.member_epoch == 0:
            found = self._join(now_ms, beat, member)
            if isinstance(found, Answer):
                return found
            member, new = found
        elif member is None:
            return Answer(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {beat.member_id} is not a member of the group.")
        elif not self._epoch_ok(member, beat):
            return Answer(ErrorCode.FENCED_MEMBER_EPOCH,
                          f"The consumer group member has a greater member epoch ({member.assignment.epoch}) than "
                          f"the one known ({beat.member_epoch})" if beat.member_epoch < member.assignment.epoch else
                          "The consumer group member has a smaller member epoch than the one received.")
        member.classic = member.join_deadline_ms = member.sync_deadline_ms = None  # it speaks this protocol now
        try:
            self.advance(now_ms, member, self._update(member, beat) or new, topics, beat.owned)
        except FencedMember as exc:
            self._remove(member.member_id)
            return Answer(ErrorCode.FENCED_MEMBER_EPOCH, str(exc))
        member.session_deadline_ms = now_ms + self.settings.session_timeout_ms
        shown = None
        if member.sent != member.assignment.assigned or beat.member_epoch == 0:
            shown = member.sent = dict(member.assignment.assigned)
        return Answer(member_id=member.member_id, member_epoch=member.assignment.epoch,
                      heartbeat_interval_ms=self.settings.heartbeat_interval_ms, assignment=shown)

    def advance(self, now_ms: int, member: Member, changed: bool, topics: Mapping[str, int],
                owned: Mapping[str, frozenset[int]] | None) -> None:
        """After a member's heartbeat or JoinGroup: a new group epoch when its subscription `changed`
        (or it is new) or the subscribed topics' partitions did, a new target for it, and the member
        reconciled towards its share. Raises FencedMember (reconcile.py)."""
        if changed or self._partitions_changed(topics):
            self.group_epoch += 1  # once, whatever changed
        if self.group_epoch != self.assignment_epoch:
            self._assign(topics)
        self._reconcile(now_ms, member, owned)

    def waiting_on_unreleased(self, member: Member) -> bool:
        """Is a partition of the member's target still held by another member (Kafka's
        waitingOnUnreleasedPartition)?"""
        missing = [(t, p) for t, ps in self.target.get(member.member_id, {}).items() for p in ps
                   if p not in member.assignment.assigned.get(t, ())]
        return any(other.assignment.holds(t, p) for t, p in missing
                   for other in self.members.values() if other is not member)

    def _join(self, now_ms: int, beat: Heartbeat, member: Member | None) -> tuple[Member, bool] | Answer:
        """The member joining (epoch 0), and whether it is new to the group."""
        if member is not None and member.assignment.epoch != 0:  # joins again: starts over
            self._remove(member.member_id, bump=False)
            member = None
        if beat.instance_id is not None:
            holder = self.static.get(beat.instance_id)
            if holder is not None and holder != beat.member_id:
                previous = self.members.get(holder)
                if previous is not None and previous.assignment.epoch != STATIC_LEAVE_EPOCH:
                    return Answer(ErrorCode.UNRELEASED_INSTANCE_ID,
                                  f"Static member {beat.member_id} with instance id {beat.instance_id} "
                                  "cannot join the group because the instance id is owned by another member.")
                if previous is not None:  # a static member back: it takes over its predecessor's partitions
                    self.members.pop(holder)
                    member = replace(previous, member_id=beat.member_id, sent=None,
                                     assignment=replace(previous.assignment, epoch=self.assignment_epoch))
                    self.members[beat.member_id] = member
                    self.target[beat.member_id] = self.target.pop(holder, {})
                    self.static[beat.instance_id] = beat.member_id
                    return member, False
        if member is None:
            if len(self.members) >= self.settings.max_size:
                return Answer(ErrorCode.GROUP_MAX_SIZE_REACHED,
                              f"The consumer group has reached its maximum capacity of {self.settings.max_size} members.")
            if beat.subscribed_names is None and beat.subscribed_regex is None:
                return Answer(ErrorCode.INVALID_REQUEST,
                              "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
            member = Member(beat.member_id, beat.instance_id, beat.rack_id, beat.client_id, beat.client_host)
            self.members[beat.member_id] = member
            if beat.instance_id is not None:
                self.static[beat.instance_id] = beat.member_id
            return member, True
        return member, False

    def _epoch_ok(self, member: Member, beat: Heartbeat) -> bool:
        """Kafka's rule: the member's epoch, or its previous one if it owns no more than its
        current assignment (a heartbeat answered but lost)."""
        if beat.member_epoch == member.assignment.epoch:
            return True
        if beat.member_epoch > member.assignment.epoch or beat.member_epoch != member.previous_epoch:
            return False
        owned = beat.owned or {}
        return all(ps <= member.assignment.assigned.get(t, frozenset()) for t, ps in owned.items())

    def _update(self, member: Member, beat: Heartbeat) -> bool:
        """Take the heartbeat's changed fields; True when the subscription or assignor changed."""
        changed = False
        if beat.rack_id is not None:
            member.rack_id = beat.rack_id
        if beat.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = beat.rebalance_timeout_ms
        if beat.subscribed_names is not None and frozenset(beat.subscribed_names) != member.subscribed_names:
            member.subscribed_names, changed = frozenset(beat.subscribed_names), True
        if beat.subscribed_regex is not None and beat.subscribed_regex != (member.subscribed_regex or ""):
            member.subscribed_regex, changed = beat.subscribed_regex or None, True
        if beat.server_assignor is not None and beat.server_assignor != member.server_assignor:
            member.server_assignor, changed = beat.server_assignor, True
        return changed

    def subscriptions(self, topics: Mapping[str, int]) -> dict[str, set[str]]:
        """Each member's subscribed topics that exist: its names, and what its regex matches
        (the whole name; internal topics never)."""
        out = {}
        for member in self.members.values():
            subscribed = {t for t in member.subscribed_names if t in topics}
            if member.subscribed_regex:
                pattern = re.compile(member.subscribed_regex)
                subscribed |= {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
            out[member.member_id] = subscribed
        return out

    def _partitions_changed(self, topics: Mapping[str, int]) -> bool:
        subscribed = {t for s in self.subscriptions(topics).values() for t in s}
        return {t: topics[t] for t in subscribed} != self.subscribed_partitions

    def _assign(self, topics: Mapping[str, int]) -> None:
        subscriptions = self.subscriptions(topics)
        chosen = next((m.server_assignor for m in self.members.values() if m.server_assignor), None)
        assignor = ASSIGNORS[chosen or self.settings.assignors[0]]
        self.target = assignor(subscriptions, topics, self.target)
        self.subscribed_partitions = {t: topics[t] for s in subscriptions.values() for t in s}
        self.assignment_epoch = self.group_epoch

    def _reconcile(self, now_ms: int, member: Member, owned: Mapping[str, frozenset[int]] | None) -> None:
        others = [m for m in self.members.values() if m is not member]

        def held_elsewhere(topic: str, partition: int) -> bool:
            return any(m.assignment.holds(topic, partition) for m in others)

        before = member.assignment
        after = reconcile(before, self.assignment_epoch, self.target.get(member.member_id, {}), held_elsewhere, owned)
        if after.epoch != before.epoch:
            member.previous_epoch = before.epoch
        member.assignment = after
        if after.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:  # classic: its join timer
            if member.revoke_deadline_ms is None:
                member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
        else:
            member.revoke_deadline_ms = None

    # ---- leaving and timing out -------------------------------------------------------------------------
    def _leave(self, now_ms: int, beat: Heartbeat) -> Answer:
        member = self.members.get(beat.member_id)
        if member is None:
            return Answer(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {beat.member_id} is not a member of the group.")
        if beat.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # its partitions stay reserved for it until its session ends (a rolling restart)
            member.assignment = replace(member.assignment, epoch=STATIC_LEAVE_EPOCH)
            member.session_deadline_ms = now_ms + self.settings.session_timeout_ms
        else:
            self._remove(member.member_id)
        return Answer(member_id=beat.member_id, member_epoch=beat.member_epoch,
                      heartbeat_interval_ms=self.settings.heartbeat_interval_ms)

    def add_member(self, member: Member) -> Member:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id
        return member

    def replace_static(self, old_id: str, new_id: str) -> None:
        """A static member back under a new member id: it keeps its predecessor's partitions and epoch."""
        member = self.members.pop(old_id)
        member.member_id, member.sent = new_id, None
        self.members[new_id] = member
        if old_id in self.target:
            self.target[new_id] = self.target.pop(old_id)
        if member.instance_id is not None:
            self.static[member.instance_id] = new_id

    def remove(self, member_id: str) -> None:
        """A member gone (it left, or was fenced): a new group epoch."""
        self._remove(member_id)

    def _remove(self, member_id: str, bump: bool = True) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        if bump:
            self.group_epoch += 1

    @staticmethod
    def _deadlines(member: Member) -> list[int]:
        return [d for d in (member.session_deadline_ms, member.revoke_deadline_ms, member.join_deadline_ms,
                            member.sync_deadline_ms) if d is not None]

    def next_deadline(self) -> int | None:
        return min((d for m in self.members.values() for d in self._deadlines(m)), default=None)

    def expire(self, now_ms: int) -> list[str]:
        """Remove members whose session ended, those that did not give up partitions within their
        rebalance timeout, and classic members that did not rejoin or sync within it (Kafka fences
        them all); the ids removed."""
        gone = [m.member_id for m in self.members.values() if min(self._deadlines(m)) <= now_ms]
        for member_id in gone:
            self._remove(member_id)
        return gone


# ---- the durable form (a state record's value) --------------------------------------------------------
DURABLE_VERSION = 1


def _parts(assigned: Partitions) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(assigned.items())}


def _unparts(found: dict[str, list[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in found.items()}


def _classic(classic: ClassicProtocol | None) -> dict | None:
    if classic is None:
        return None
    return {"session_timeout_ms": classic.session_timeout_ms,
            "protocols": [[name, base64.b64encode(metadata).decode()] for name, metadata in classic.protocols]}


def _unclassic(found: dict | None) -> ClassicProtocol | None:
    if found is None:
        return None
    return ClassicProtocol(found["session_timeout_ms"],
                           tuple((name, base64.b64decode(metadata)) for name, metadata in found["protocols"]))


def durable(group: ConsumerGroup) -> bytes:
    """What must survive a restart: epochs, the target, each member's subscription and assignment
    (not its timers: they start again when the group is loaded)."""
    return json.dumps({
        "version": DURABLE_VERSION, "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "target": {m: _parts(a) for m, a in sorted(group.target.items())},
        "subscribed_partitions": dict(sorted(group.subscribed_partitions.items())),
        "members": [{"id": m.member_id, "instance": m.instance_id, "rack": m.rack_id, "client": m.client_id,
                     "host": m.client_host, "names": sorted(m.subscribed_names), "regex": m.subscribed_regex,
                     "assignor": m.server_assignor, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                     "state": m.assignment.state.value, "epoch": m.assignment.epoch,
                     "previous_epoch": m.previous_epoch, "assigned": _parts(m.assignment.assigned),
                     "revoking": _parts(m.assignment.pending_revocation), "classic": _classic(m.classic)}
                    for m in group.members.values()],
    }, separators=(",", ":")).encode()


def load(group_id: str, settings: Settings, value: bytes, now_ms: int) -> ConsumerGroup:
    """A group from its durable form; every member's session (and revocation) timer starts now."""
    found = json.loads(value)
    if found.get("version") != DURABLE_VERSION:
        raise ValueError(f"consumer group {group_id!r}: state record version {found.get('version')!r}")
    group = ConsumerGroup(group_id, settings)
    group.group_epoch, group.assignment_epoch = found["group_epoch"], found["assignment_epoch"]
    group.target = {m: _unparts(a) for m, a in found["target"].items()}
    group.subscribed_partitions = dict(found["subscribed_partitions"])
    for m in found["members"]:
        assignment = MemberAssignment(MemberState(m["state"]), m["epoch"], _unparts(m["assigned"]),
                                      _unparts(m["revoking"]))
        member = Member(m["id"], m["instance"], m["rack"], m["client"], m["host"], frozenset(m["names"]),
                        m["regex"], m["assignor"], m["rebalance_timeout_ms"], assignment, m["previous_epoch"],
                        classic=_unclassic(m.get("classic")))  # records written before classic members had none
        member.session_deadline_ms = now_ms + (member.classic.session_timeout_ms if member.classic
                                               else settings.session_timeout_ms)
        if assignment.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
            member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static[member.instance_id] = member.member_id
    return group
