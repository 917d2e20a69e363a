"""One consumer group's membership state machine (Kafka's classic protocol).

Owns members, generations, protocol selection, and the rebalance, sync and
session deadlines. Sans-IO: every event takes `now_ms`, and members waiting on
JoinGroup or SyncGroup are answered through the reply callables they handed
in. It never sleeps and never touches trio, sockets or disk; the coordinator
feeds it events and calls `expire(now_ms)` when `next_deadline()` passes.
Transitions follow Kafka's GroupCoordinator; `ALLOWED_FROM` is the table.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum

from broker.groups.member import (
    JoinedMember,
    JoinReply,
    JoinRequest,
    JoinResult,
    Member,
    SyncReply,
    SyncResult,
)
from protocol.errors import ErrorCode

__all__ = ["ALLOWED_FROM", "Group", "GroupState", "IllegalTransition", "JoinRequest", "JoinResult", "Member",
           "SyncResult"]

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# target state -> the states it may be entered from (Kafka's validPreviousStates)
ALLOWED_FROM: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(eq=False)
class Group:
    group_id: str
    initial_rebalance_delay_ms: int
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, float] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> deadline
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_sync: set[str] = field(default_factory=set)
    rebalance_deadline: float | None = None
    sync_deadline: float | None = None
    initial_delay_remaining_ms: int | None = None  # set while the initial rebalance delay runs
    new_member_added: bool = False

    # --- transitions -------------------------------------------------------------------------

    def transition_to(self, target: GroupState) -> None:
        if self.state not in ALLOWED_FROM[target]:
            raise IllegalTransition(f"group {self.group_id!r}: {self.state.value} -> {target.value}")
        self.state = target

    def _prepare_rebalance(self, now: float) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            for member in self.members.values():
                member.assignment = b""
                member.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self.pending_sync.clear()
        self.sync_deadline = None
        if self.state is GroupState.EMPTY:
            delay = self.initial_rebalance_delay_ms
            self.initial_delay_remaining_ms = max(self.rebalance_timeout_ms() - delay, 0)
            self.rebalance_deadline = now + delay
        else:
            self.initial_delay_remaining_ms = None
            self.rebalance_deadline = now + self.rebalance_timeout_ms()
        self.transition_to(GroupState.PREPARING_REBALANCE)
        self._try_complete_join(now)

    def _maybe_prepare_rebalance(self, now: float) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(now)

    def _try_complete_join(self, now: float) -> None:
        """Kafka's DelayedJoin.tryComplete; the initial delay completes only by expiring."""
        if (self.state is GroupState.PREPARING_REBALANCE and self.initial_delay_remaining_ms is None
                and self._all_members_joined()):
            self._complete_join(now)

    def _all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_reply is not None for m in self.members.values())

    def _complete_join(self, now: float) -> None:
        for member in list(self.members.values()):
            if member.join_reply is None and member.instance_id is None:
                self._remove(member.member_id)
        self.rebalance_deadline = None
        self.initial_delay_remaining_ms = None
        self.new_member_added = False
        if self.leader_id is not None and self.members[self.leader_id].join_reply is None:
            joined = [m.member_id for m in self.members.values() if m.join_reply is not None]
            if joined:
                self.leader_id = joined[0]
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
            return
        self.protocol_name = self.select_protocol()
        self.transition_to(GroupState.COMPLETING_REBALANCE)
        everyone = tuple(JoinedMember(m.member_id, m.instance_id, m.metadata(self.protocol_name))
                         for m in self.members.values())
        for member in self.members.values():
            member.is_new = False
            member.session_deadline = now + member.session_timeout_ms
            member.answer_join(self._current_join_result(member.member_id, everyone))
        self.pending_sync = set(self.members)
        self.sync_deadline = now + self.rebalance_timeout_ms()

    def _current_join_result(self, member_id: str, everyone: tuple[JoinedMember, ...] | None = None) -> JoinResult:
        if member_id == self.leader_id and everyone is None:
            everyone = tuple(JoinedMember(m.member_id, m.instance_id, m.metadata(self.protocol_name))
                             for m in self.members.values())
        return JoinResult(ErrorCode.NONE, member_id, self.generation_id, self.protocol_type, self.protocol_name,
                          self.leader_id or "", everyone if member_id == self.leader_id else ())

    # --- membership bookkeeping --------------------------------------------------------------

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member) -> None:
        """A member that arrives holding its assignment (a group converted from the consumer
        protocol: broker/groups/migration.py)."""
        self._add(member)

    def rebalance(self, now: float) -> None:
        """Start a rebalance that members learn of from their next heartbeat (a converted group)."""
        self._maybe_prepare_rebalance(now)

    def _add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _remove_member_and_update(self, member_id: str, now: float) -> None:
        member = self.members[member_id]
        member.answer_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        member.answer_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._remove(member_id)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(now)

    def is_fenced(self, instance_id: str | None, member_id: str) -> bool:
        return instance_id is not None and instance_id in self.static_members \
            and self.static_members[instance_id] != member_id

    def supports_protocols(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        common = set(next(members).protocol_names())
        for member in members:
            common &= set(member.protocol_names())
        return common

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support; most votes wins."""
        candidates = self.candidate_protocols()
        order: list[str] = []
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name in member.protocol_names() if name in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda name: votes[name])  # ties: the earliest voted wins

    def _touch(self, member: Member, now: float) -> None:
        member.session_deadline = max(member.session_deadline, now + member.session_timeout_ms)

    # --- events ------------------------------------------------------------------------------

    def join(self, now: float, request: JoinRequest, reply: JoinReply) -> None:
        """JoinGroup; `reply` is called now (errors, MEMBER_ID_REQUIRED) or when the rebalance completes."""
        if self.state is GroupState.DEAD:
            return reply(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id))
        if not self.supports_protocols(request.protocol_type, request.protocols):
            return reply(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
        if request.member_id == "":
            new_id = f"{request.client_id}-{uuid.uuid4()}"
            if request.instance_id is not None:
                return self._static_join(now, request, new_id, reply)
            if request.require_known_member_id:
                self.pending_members[new_id] = now + request.session_timeout_ms
                return reply(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return self._add_member_and_rebalance(now, request, new_id, reply)
        if request.member_id in self.pending_members:
            del self.pending_members[request.member_id]
            return self._add_member_and_rebalance(now, request, request.member_id, reply)
        if self.is_fenced(request.instance_id, request.member_id):
            return reply(JoinResult(ErrorCode.FENCED_INSTANCE_ID, request.member_id))
        member = self.members.get(request.member_id)
        if member is None or self.state in (GroupState.EMPTY, GroupState.DEAD):
            return reply(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
        same = member.protocols == request.protocols
        if self.state is GroupState.COMPLETING_REBALANCE and same:
            return reply(self._current_join_result(member.member_id))
        if self.state is GroupState.STABLE and same and member.member_id != self.leader_id:
            return reply(self._current_join_result(member.member_id))
        self._update_member_and_rebalance(now, member, request, reply)

    def _add_member_and_rebalance(self, now: float, request: JoinRequest, member_id: str, reply: JoinReply) -> None:
        member = Member(member_id, request.instance_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms, request.protocol_type,
                        request.protocols, session_deadline=now + NEW_MEMBER_JOIN_TIMEOUT_MS, is_new=True,
                        join_reply=reply)
        if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
            self.new_member_added = True
        self._add(member)
        self._maybe_prepare_rebalance(now)
        self._try_complete_join(now)

    def _update_member_and_rebalance(self, now: float, member: Member, request: JoinRequest,
                                     reply: JoinReply) -> None:
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.answer_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))  # a superseded join
        member.join_reply = reply
        self._maybe_prepare_rebalance(now)
        self._try_complete_join(now)

    def _static_join(self, now: float, request: JoinRequest, new_id: str, reply: JoinReply) -> None:
        old_id = self.static_members.get(request.instance_id)
        if old_id is None:
            return self._add_member_and_rebalance(now, request, new_id, reply)
        # A restarted static member takes over its old identity; the old one is fenced.
        old_leader = self.leader_id
        member = self.members.pop(old_id)
        member.answer_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        member.answer_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        member.client_id, member.client_host = request.client_id, request.client_host
        self.members[new_id] = member
        self.static_members[request.instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        self._touch(member, now)
        if self.state is GroupState.STABLE and member.protocols == request.protocols:
            # Same subscription: keep the generation and the assignment. The old leader id is
            # returned so that a restarted leader does not compute an assignment nobody reads.
            member.session_timeout_ms = request.session_timeout_ms
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            return reply(JoinResult(ErrorCode.NONE, new_id, self.generation_id, self.protocol_type,
                                    self.protocol_name, old_leader or ""))
        self._update_member_and_rebalance(now, member, request, reply)

    def sync(self, now: float, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             reply: SyncReply) -> None:
        if self.state is GroupState.DEAD:
            return reply(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if self.is_fenced(instance_id, member_id):
            return reply(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member = self.members.get(member_id)
        if member is None:
            return reply(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if generation_id != self.generation_id:
            return reply(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != self.protocol_type) or \
                (protocol_name is not None and protocol_name != self.protocol_name):
            return reply(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if self.state is GroupState.EMPTY:
            return reply(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if self.state is GroupState.PREPARING_REBALANCE:
            return reply(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self._touch(member, now)
        self._synced(member_id)
        if self.state is GroupState.STABLE:
            return reply(SyncResult(ErrorCode.NONE, self.protocol_type, self.protocol_name, member.assignment))
        member.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a superseded sync
        member.sync_reply = reply
        if member_id == self.leader_id:
            for each in self.members.values():
                each.assignment = assignments.get(each.member_id, b"")
                each.answer_sync(SyncResult(ErrorCode.NONE, self.protocol_type, self.protocol_name,
                                            each.assignment))
            self.transition_to(GroupState.STABLE)

    def _synced(self, member_id: str) -> None:
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline = None

    def heartbeat(self, now: float, member_id: str, instance_id: str | None, generation_id: int) -> int:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error, member = self._current_member(member_id, instance_id, generation_id)
        if member is None:
            return error
        if self.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._touch(member, now)
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, now: float, member_id: str, instance_id: str | None) -> int:
        """One member of a LeaveGroup; the group-level DEAD check is the caller's."""
        if member_id == "" and instance_id is not None:
            member_id = self.static_members.get(instance_id, "")
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._try_complete_join(now)
            return ErrorCode.NONE
        if self.is_fenced(instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member_and_update(member_id, now)
        return ErrorCode.NONE

    def validate_commit(self, now: float, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """Whether an OffsetCommit may be written; a valid member's commit also counts as a heartbeat."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and member_id == "" and instance_id is None:
            # The simple-commit path: assign() users and admin tools, only while nobody is a member.
            return ErrorCode.NONE if self.state is GroupState.EMPTY else ErrorCode.UNKNOWN_MEMBER_ID
        error, member = self._current_member(member_id, instance_id, generation_id)
        if member is None:
            return error
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._touch(member, now)
        return ErrorCode.NONE

    def _current_member(self, member_id: str, instance_id: str | None,
                        generation_id: int) -> tuple[int, Member | None]:
        """(NONE, member) when the caller is a member of this generation, else (error, None)."""
        if self.is_fenced(instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID, None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION, None
        return ErrorCode.NONE, member

    def kill(self) -> None:
        """DeleteGroups (only of an Empty group) or coordinator shutdown."""
        for member in self.members.values():
            member.answer_join(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member.member_id))
            member.answer_sync(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        self.transition_to(GroupState.DEAD)
        self.members.clear()
        self.pending_members.clear()
        self.static_members.clear()
        self.pending_sync.clear()
        self.rebalance_deadline = self.sync_deadline = None

    # --- the clock ---------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        deadlines = [d for d in (self.rebalance_deadline, self.sync_deadline) if d is not None]
        deadlines += self.pending_members.values()
        deadlines += (m.session_deadline for m in self.members.values() if self._session_counts(m))
        return min(deadlines, default=None)

    def _session_counts(self, member: Member) -> bool:
        """Kafka's shouldKeepAlive: members waiting on a join or sync answer are covered by other timers,
        except a new member, which must finish joining within NEW_MEMBER_JOIN_TIMEOUT_MS."""
        if member.join_reply is not None:
            return member.is_new
        return member.sync_reply is None

    def expire(self, now: float) -> None:
        """Fire every deadline that is due: rebalance end, missing SyncGroups, sessions, pending ids."""
        if self.state is GroupState.DEAD:
            return
        if self.rebalance_deadline is not None and self.rebalance_deadline <= now:
            remaining = self.initial_delay_remaining_ms
            if remaining is not None and self.new_member_added and remaining > 0:
                delay = min(self.initial_rebalance_delay_ms, remaining)
                self.new_member_added = False
                self.initial_delay_remaining_ms = max(remaining - delay, 0)
                self.rebalance_deadline = now + delay
            else:
                self._complete_join(now)
        if self.sync_deadline is not None and self.sync_deadline <= now:
            self.sync_deadline = None
            if self.pending_sync and self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
                for member_id in list(self.pending_sync):
                    member = self.members[member_id]
                    member.answer_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
                    self._remove(member_id)
                self._prepare_rebalance(now)
        for member_id, deadline in list(self.pending_members.items()):
            if deadline <= now:
                del self.pending_members[member_id]
                self._try_complete_join(now)
        for member in list(self.members.values()):
            if member.member_id in self.members and self._session_counts(member) and member.session_deadline <= now:
                self._remove_member_and_update(member.member_id, now)
