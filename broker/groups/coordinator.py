"""The group coordinator: every consumer group of this broker, their clock, and
their committed offsets.

Turns handler calls into events on each group's state machine (broker/groups/state.py
for the classic protocol, broker/groups/consumer_group.py for KIP-848's consumer
protocol: a group id is one or the other, their committed offsets are the same) and
runs one timer task (`run`) that fires group deadlines. Time is trio's clock, so tests drive it with `trio.testing.MockClock`;
nothing here sleeps for a fixed time. Committed offsets live in the store's
`OffsetStore`; its fsyncing writes run in a worker thread, never on the event
loop. Speaks no wire format: handlers translate to and from kafka-python.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import trio

from broker.config import BrokerConfig
from broker.groups import classic_members, migration
from broker.groups.consumer_group import (
    LEAVE_EPOCH,
    Answer,
    ConsumerGroup,
    Heartbeat,
    Settings,
    durable,
    load,
)
from broker.groups.member import JoinRequest, JoinResult, SyncResult
from broker.groups.state import Group, GroupState
from protocol.errors import ErrorCode
from store import StoreError
from store.state import CONSUMER_GROUP

OFFSET_METADATA_TOO_LARGE = ErrorCode.OFFSET_METADATA_TOO_LARGE
OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default

Committed = tuple[int, str | None, int]  # offset, metadata, leader epoch
CommitEntry = tuple[str, int, int, str | None, int]  # topic, partition, offset, metadata, leader epoch


class StateBackend(Protocol):
    """What the coordinator needs of the Store for consumer-protocol groups' state records."""

    def write_state(self, records: list[tuple[bytes, bytes | None]], durable: bool = True) -> None: ...
    def state_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]: ...


class OffsetBackend(Protocol):
    """What the coordinator needs of store.OffsetStore."""

    def commit_many(self, group: str, entries: list[CommitEntry]) -> None: ...
    def fetch(self, group: str, topic: str, partition: int) -> Committed | None: ...
    def fetch_group(self, group: str) -> dict[tuple[str, int], Committed]: ...
    def groups(self) -> list[str]: ...
    def delete_group(self, group: str) -> None: ...


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups' view; metadata and assignments only while Stable, as Kafka does."""

    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[MemberSummary, ...]


class _Answer:
    """A one-shot slot a group fills in when a waiting JoinGroup or SyncGroup completes."""

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: JoinResult | SyncResult | None = None

    def __call__(self, value: JoinResult | SyncResult) -> None:
        if not self._event.is_set():
            self._value = value
            self._event.set()

    async def wait(self):
        await self._event.wait()
        return self._value


class GroupCoordinator:
    def __init__(self, offsets: OffsetBackend, *, initial_rebalance_delay_ms: int = 3000,
                 min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1_800_000,
                 state: StateBackend | None = None) -> None:
        self.offsets = offsets
        self.state = state  # where consumer-protocol groups are kept (None: in memory only, for unit tests)
        self._saved: dict[str, bytes] = {}  # each consumer group's state record as last written
        self._loaded = state is None
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.groups: dict[str, Group] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848's, by group id
        self.consumer_settings = Settings()
        self.migration_policy = "bidirectional"  # group.consumer.migration.policy (broker/groups/migration.py)
        # Is this id a share group's? The broker sets it to its share coordinator's: such an id is
        # refused to classic and consumer-protocol members and to commits, as Kafka refuses it.
        self.is_share_group: Callable[[str], bool] = lambda group_id: False
        # A group config set for a group (IncrementalAlterConfigs on a GROUP resource), None when not:
        # the broker sets it to where group configs are kept (the share coordinator's store)
        self.group_config: Callable[[str, str], str | None] = lambda group_id, name: None
        self._wakeup = trio.Event()
        self._scheduled = math.inf  # when the timer task will next look at the groups

    @classmethod
    def from_config(cls, config: BrokerConfig, offsets: OffsetBackend,
                    state: StateBackend | None = None) -> GroupCoordinator:
        coordinator = cls(offsets, initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                          min_session_timeout_ms=config["group.min.session.timeout.ms"],
                          max_session_timeout_ms=config["group.max.session.timeout.ms"], state=state)
        coordinator.consumer_settings = Settings(
            session_timeout_ms=config["group.consumer.session.timeout.ms"],
            heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            assignors=tuple(a.strip() for a in config["group.consumer.assignors"].split(",") if a.strip()),
            max_size=config["group.consumer.max.size"])
        coordinator.migration_policy = config["group.consumer.migration.policy"].lower()
        return coordinator

    # --- the clock ---------------------------------------------------------------------------

    @staticmethod
    def now_ms() -> int:
        # Rounded up so that waking at a deadline always counts as reaching it.
        return math.ceil(trio.current_time() * 1000)

    async def run(self) -> None:
        """Fire group deadlines as they fall due; woken early when a group needs an earlier one."""
        self._load()
        while True:
            self._scheduled = min((d for g in [*self.groups.values(), *self.consumer_groups.values()]
                                   if (d := g.next_deadline()) is not None), default=math.inf)
            with trio.move_on_at(self._scheduled / 1000):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = self.now_ms()
            for group in list(self.groups.values()):
                group.expire(now)
            for consumer_group in list(self.consumer_groups.values()):
                modern = {m.member_id for m in consumer_group.members.values() if m.classic is None}
                epoch = consumer_group.group_epoch
                gone = consumer_group.expire(now)
                if gone and not (modern & set(gone) and await self._maybe_downgrade(consumer_group, epoch)):
                    await self._persist(consumer_group)  # a failure: written with the group's next change

    def _load(self) -> None:
        """The consumer-protocol groups the state topic holds (at start, and on a new master):
        their members' session timers start now, as Kafka's do when a coordinator loads them."""
        if self._loaded:
            return
        self._loaded = True
        now = self.now_ms()
        for key, value in self.state.state_items(CONSUMER_GROUP):
            group_id = key[len(CONSUMER_GROUP):].decode()
            self.consumer_groups[group_id] = load(group_id, self.consumer_settings, value, now)
            self._saved[group_id] = value

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """A consumer-protocol group (None: none by that id), for describing it."""
        self._load()
        return self.consumer_groups.get(group_id)

    async def _maybe_downgrade(self, group: ConsumerGroup, epoch: int) -> bool:
        """After consumer-protocol members left: a group of only classic members becomes a classic
        group again at `epoch` (the group's before they left), as Kafka's downgrade under the
        policies `downgrade` and `bidirectional`."""
        if not (migration.downgrades(self.migration_policy) and group.members
                and all(m.classic is not None for m in group.members.values())):
            return False
        classic = migration.to_classic_group(group, epoch, self.now_ms(), self.initial_rebalance_delay_ms)
        del self.consumer_groups[group.group_id]
        self.groups[group.group_id] = classic
        self._changed(classic)
        if self.state is not None:
            try:  # classic groups are not kept in the state topic: the consumer group's record goes
                await trio.to_thread.run_sync(self.state.write_state, [(CONSUMER_GROUP + group.group_id.encode(), None)])
                self._saved.pop(group.group_id, None)
            except StoreError:  # loaded again at the next start as the consumer group it was
                pass
        return True

    async def _persist(self, group: ConsumerGroup) -> int:
        """Write the group's state record if it changed (a worker thread: it fsyncs); NOT_COORDINATOR
        when the store refused it, as for a commit its offsets topic refused."""
        if self.state is None:
            return ErrorCode.NONE
        value = durable(group)
        if self._saved.get(group.group_id) == value:
            return ErrorCode.NONE
        try:
            await trio.to_thread.run_sync(self.state.write_state, [(CONSUMER_GROUP + group.group_id.encode(), value)])
        except StoreError:
            return ErrorCode.NOT_COORDINATOR
        self._saved[group.group_id] = value
        return ErrorCode.NONE

    def _changed(self, group: Group | ConsumerGroup) -> None:
        if isinstance(group, Group):
            group.expire(self.now_ms())  # deadlines already due, such as a zero initial delay
        deadline = group.next_deadline()
        if deadline is not None and deadline < self._scheduled:
            self._wakeup.set()

    # --- lookup ------------------------------------------------------------------------------

    def _group(self, group_id: str, create: bool = False) -> Group | None:
        group = self.groups.get(group_id)
        if group is None and (create or group_id in self.offsets.groups()):
            group = Group(group_id, self.initial_rebalance_delay_ms)
            self.groups[group_id] = group
        return group

    def classic_in_use(self, group_id: str) -> bool:
        """Does a classic group with members (or joining ones) hold this id?"""
        classic = self.groups.get(group_id)
        return classic is not None and classic.state not in (GroupState.EMPTY, GroupState.DEAD)

    # --- membership --------------------------------------------------------------------------

    async def consumer_heartbeat(self, group_id: str, beat: Heartbeat, topics: dict[str, int]) -> Answer:
        """ConsumerGroupHeartbeat (KIP-848). A classic group that has members becomes a consumer-protocol
        group with them when the migration policy allows (broker/groups/migration.py; else
        GROUP_ID_NOT_FOUND, as Kafka answers); one with only offsets becomes one and keeps them. The
        last consumer-protocol member leaving a group of classic members makes it classic again."""
        if not group_id:
            return Answer(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
        self._load()
        group = self.consumer_groups.get(group_id)
        if group is None:
            not_consumer = Answer(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if self.is_share_group(group_id):
                return not_consumer
            if self.classic_in_use(group_id):
                classic = self.groups[group_id]
                if beat.member_epoch != 0 or not migration.can_upgrade(
                        classic, self.migration_policy, self.consumer_settings.max_size):
                    return not_consumer
                group = migration.to_consumer_group(classic, self._settings_of(group_id), topics, self.now_ms())
                if group is None:
                    return Answer(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to "
                                  "consumer group because the embedded consumer protocol is malformed.")
                del self.groups[group_id]
                self.consumer_groups[group_id] = group
            elif beat.member_epoch != 0:
                return Answer(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group_id} has no member {beat.member_id}.")
            else:
                self.groups.pop(group_id, None)
                group = self.consumer_groups[group_id] = ConsumerGroup(group_id, self.consumer_settings)
        group.settings = self._settings_of(group_id)
        leaving = group.members.get(beat.member_id) if beat.member_epoch == LEAVE_EPOCH else None
        downgrade = leaving is not None and migration.should_downgrade(group, leaving, self.migration_policy)
        epoch = group.group_epoch
        answer = group.heartbeat(self.now_ms(), beat, topics)
        if downgrade and await self._maybe_downgrade(group, epoch):
            return answer
        self._changed(group)
        error = await self._persist(group)  # answered once the change is durable, as Kafka does
        return Answer(error, "the group's state could not be written") if error else answer

    def _settings_of(self, group_id: str) -> Settings:
        """The broker's group.consumer.* settings, with the group's own session timeout and heartbeat
        interval where its configs set them (consumer.session.timeout.ms, consumer.heartbeat.interval.ms)."""
        session = self.group_config(group_id, "consumer.session.timeout.ms")
        heartbeat = self.group_config(group_id, "consumer.heartbeat.interval.ms")
        if session is None and heartbeat is None:
            return self.consumer_settings
        return dataclasses.replace(
            self.consumer_settings,
            session_timeout_ms=int(session) if session is not None else self.consumer_settings.session_timeout_ms,
            heartbeat_interval_ms=int(heartbeat) if heartbeat is not None else self.consumer_settings.heartbeat_interval_ms)

    async def join(self, group_id: str, request: JoinRequest, topics: Mapping[str, int] | None = None) -> JoinResult:
        """JoinGroup; `topics` (every topic's partition count) for a consumer-protocol group's
        classic members (broker/groups/classic_members.py), whose assignor runs here."""
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, request.member_id)
        if self.is_share_group(group_id):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        self._load()
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:  # a classic member among consumer-protocol members
                consumer_group.settings = self._settings_of(group_id)
                new_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
                result = classic_members.join(consumer_group, self.now_ms(), request, topics or {}, new_id)
                self._changed(consumer_group)
                error = await self._persist(consumer_group)
                return JoinResult(error, request.member_id) if error else result
            del self.consumer_groups[group_id]  # empty: it becomes a classic group, its offsets kept
        if not self.min_session_timeout_ms <= request.session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        group = self._group(group_id, create=request.member_id == "")
        if group is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        answer = _Answer()
        group.join(self.now_ms(), request, answer)
        self._changed(group)
        return await answer.wait()

    async def sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            result = classic_members.sync(consumer_group, self.now_ms(), member_id, instance_id, generation_id,
                                          protocol_type, protocol_name)
            self._changed(consumer_group)
            return result
        group = self._group(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        answer = _Answer()
        group.sync(self.now_ms(), member_id, instance_id, generation_id, protocol_type, protocol_name,
                   assignments, answer)
        self._changed(group)
        return await answer.wait()

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = classic_members.heartbeat(consumer_group, self.now_ms(), member_id, instance_id, generation_id)
            self._changed(consumer_group)
            return error
        group = self._group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.heartbeat(self.now_ms(), member_id, instance_id, generation_id)
        self._changed(group)
        return error

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup: (group-level error, one error per leaving member)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, [ErrorCode.INVALID_GROUP_ID] * len(leaving)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            errors = [classic_members.leave(consumer_group, member_id, instance_id)
                      for member_id, instance_id in leaving]
            self._changed(consumer_group)
            await self._persist(consumer_group)  # a failure: written with the group's next change
            return ErrorCode.NONE, errors
        group = self._group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = [group.leave(self.now_ms(), member_id, instance_id) for member_id, instance_id in leaving]
        self._changed(group)
        return ErrorCode.NONE, errors

    # --- committed offsets -------------------------------------------------------------------

    async def commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                     entries: list[CommitEntry]) -> list[int]:
        """OffsetCommit of partitions the caller already knows exist; one error per entry."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        if self.is_share_group(group_id):
            return [ErrorCode.GROUP_ID_NOT_FOUND] * len(entries)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = _consumer_commit_error(consumer_group, member_id, generation_id)
        else:
            group = self._group(group_id, create=generation_id < 0)
            if group is None:
                return [ErrorCode.ILLEGAL_GENERATION] * len(entries)
            error = group.validate_commit(self.now_ms(), member_id, instance_id, generation_id)
            self._changed(group)
        if error:
            return [error] * len(entries)
        errors = [OFFSET_METADATA_TOO_LARGE if metadata is not None and len(metadata) > OFFSET_METADATA_MAX_BYTES
                  else ErrorCode.NONE for _, _, _, metadata, _ in entries]
        accepted = [entry for entry, err in zip(entries, errors) if err == ErrorCode.NONE]
        if accepted:
            try:
                await trio.to_thread.run_sync(self.offsets.commit_many, group_id, accepted)
            except StoreError:  # as Kafka maps a failed append to its offsets topic: find the coordinator again
                return [ErrorCode.NOT_COORDINATOR if err == ErrorCode.NONE else err for err in errors]
        return errors

    def committed(self, group_id: str, topic: str, partition: int) -> Committed | None:
        return self.offsets.fetch(group_id, topic, partition)

    def committed_all(self, group_id: str) -> dict[tuple[str, int], Committed]:
        return self.offsets.fetch_group(group_id)

    # --- administration ----------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupSummary:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:  # DescribeGroups of a consumer-protocol group: its state, no members
            return GroupSummary(group_id, consumer_group.state.capitalize(), "consumer", "", ())
        group = self._group(group_id)
        if group is None or group.state is GroupState.DEAD:
            return GroupSummary(group_id, GroupState.DEAD.value, "", "", ())
        stable = group.state is GroupState.STABLE
        members = tuple(MemberSummary(m.member_id, m.instance_id, m.client_id, m.client_host,
                                      m.metadata(group.protocol_name) if stable else b"",
                                      m.assignment if stable else b"")
                        for m in group.members.values())
        return GroupSummary(group_id, group.state.value, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every live group, including offsets-only ones;
        a consumer-protocol group's state as Kafka names it (Empty, Assigning, Reconciling, Stable)."""
        self._load()
        for group_id in self.offsets.groups():
            if group_id not in self.consumer_groups:
                self._group(group_id)
        return [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()
                if g.state is not GroupState.DEAD] + [
            (g.group_id, "consumer", g.state.capitalize()) for g in self.consumer_groups.values()]

    async def delete(self, group_id: str) -> int:
        self._load()
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return ErrorCode.NON_EMPTY_GROUP
            if self.state is not None:
                try:
                    await trio.to_thread.run_sync(self.state.write_state, [(CONSUMER_GROUP + group_id.encode(), None)])
                except StoreError:
                    return ErrorCode.NOT_COORDINATOR
            self._saved.pop(group_id, None)
            del self.consumer_groups[group_id]
        group = self._group(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        group.kill()  # stays registered as Dead until its offsets are gone, so nothing revives it early
        try:
            await trio.to_thread.run_sync(self.offsets.delete_group, group_id)
        except StoreError:  # the tombstones were refused: the offsets stay, the group comes back from them
            return ErrorCode.NOT_COORDINATOR
        finally:
            if self.groups.get(group_id) is group:
                del self.groups[group_id]
        return ErrorCode.NONE


def _consumer_commit_error(group: ConsumerGroup, member_id: str, epoch: int) -> int:
    """OffsetCommit in a consumer-protocol group: a member at its current epoch (any other is
    STALE_MEMBER_EPOCH), or an admin's commit (generation -1, no member) while the group is empty."""
    if epoch < 0 and not member_id:
        return ErrorCode.NONE if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member.classic is not None:
        return classic_members.commit_error(member, epoch)
    if epoch != member.assignment.epoch:  # older or newer alike, as Kafka 4.4's validateMemberEpoch
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
