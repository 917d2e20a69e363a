"""Share groups on this broker (KIP-932): their membership, the share-partitions of the partitions
this node leads, the members' share sessions, the groups' configs, and one timer task for
sessions and acquisition locks. Kafka splits this between the group coordinator's share half,
SharePartitionManager with its ShareSessionCache, and the share coordinator that keeps
__share_group_state; RocketMQ 5 has its POP consumption with per-message invisibility times.

Every share-partition's state is a record of the commitlog's state topic (store/state.py
SHARE_PARTITION), written before an acknowledgement is answered, so a restart or a broker group's
new master loads it: acknowledged records never come back, acquired ones are delivered again.
Time is trio's clock (tests drive it with trio.testing.MockClock); writes run in a worker thread.
Speaks no wire format: broker/handlers/share_groups.py translates."""

from __future__ import annotations

import math
import re
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from broker.groups.consumer_group import Settings as ConsumerSettings
from broker.groups.share_group import Settings, ShareAnswer, ShareGroup, ShareHeartbeat
from broker.groups.share_partition import RELEASE, SharePartition, decode, encode
from protocol.errors import ErrorCode
from store import StoreError
from store.state import GROUP_CONFIG, SHARE_PARTITION

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.groups.coordinator import GroupCoordinator, StateBackend
    from broker.groups.dead_letters import DeadLetters

_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
Key = tuple[str, str, int]  # group, topic, partition
# (log start offset, high watermark) of a partition this node leads; None: it leads no such partition
Offsets = Callable[[str, int], "tuple[int, int] | None"]

# the group configs Kafka 4.4 takes for share groups (IncrementalAlterConfigs on a GROUP), and defaults
GROUP_CONFIGS = {
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
    "share.record.lock.duration.ms": None,  # None: the broker's group.share.* setting
    "share.delivery.count.limit": None,
    "share.session.timeout.ms": None,
    "share.heartbeat.interval.ms": None,
    "errors.deadletterqueue.topic.name": "",
    "errors.deadletterqueue.copy.record.enable": "false",
    "gregor.share.release.delay.ms": "",  # Gregor's: RocketMQ's retry delays after RELEASE (none: Kafka's)
    # a consumer-protocol group's (KIP-848) own session and heartbeat: kept here with the others, applied
    # by the group coordinator; None: the broker's group.consumer.* setting
    "consumer.session.timeout.ms": None,
    "consumer.heartbeat.interval.ms": None,
}


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The broker's group.share.* settings (Kafka 4.4's defaults), and the group.consumer.* ones a
    consumer-protocol group's configs fall back to."""

    membership: Settings = Settings()
    lock_ms: int = 30000
    delivery_limit: int = 5
    max_in_flight: int = 2000
    max_sessions: int = 2000
    consumer: ConsumerSettings = ConsumerSettings()

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ShareSettings:
        return cls(Settings(config["group.share.session.timeout.ms"], config["group.share.heartbeat.interval.ms"],
                            config["group.share.max.size"]),
                   config["group.share.record.lock.duration.ms"], config["group.share.delivery.count.limit"],
                   config["group.share.partition.max.record.locks"], config["group.share.max.share.sessions"],
                   ConsumerSettings(config["group.consumer.session.timeout.ms"],
                                    config["group.consumer.heartbeat.interval.ms"]))


@dataclass(slots=True)
class ShareSession:
    """A member's share session with this broker (Kafka's ShareSession): the partitions it reads,
    and the epoch its next request must carry."""

    epoch: int
    partitions: set[tuple[str, int]] = field(default_factory=set)


class SessionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def release_delays(value: str) -> tuple[int, ...]:
    """gregor.share.release.delay.ms: comma-separated delays, the n-th for a record released after its
    n-th delivery (ValueError for anything but non-negative integers)."""
    delays = tuple(int(v) for v in value.split(",") if v.strip()) if value.strip() else ()
    if any(d < 0 for d in delays):
        raise ValueError("delays are at least 0")
    return delays


# java.time.Duration.parse's ISO-8601 form (PnDTnHnMn.nS, each part signed, fraction of seconds up to
# 9 digits): Python's standard library parses no ISO durations, and this is the one form Kafka takes
_JAVA_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                            r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                            re.IGNORECASE)
BY_DURATION = "by_duration:"


def reset_duration_ms(value: str) -> int | None:
    """share.auto.offset.reset: None for earliest or latest, the duration in ms for
    by_duration:<ISO-8601 duration>; ValueError for anything else or a negative duration (as
    Kafka's ShareGroupAutoOffsetResetStrategy)."""
    if value in ("earliest", "latest"):
        return None
    match = _JAVA_DURATION.fullmatch(value.removeprefix(BY_DURATION)) if value.startswith(BY_DURATION) else None
    if match is None or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(value)
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    nanos = int((fraction or "").ljust(9, "0"))
    if seconds and seconds.startswith("-"):
        nanos = -nanos
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
          + int(seconds or 0) * 1000) * 1_000_000 + nanos
    ms = -ms if sign == "-" else ms
    if ms < 0:
        raise ValueError(value)
    return ms // 1_000_000


def partition_key(group: str, topic: str, partition: int) -> bytes:
    g, t = group.encode(), topic.encode()
    return SHARE_PARTITION + _U16.pack(len(g)) + g + _U16.pack(len(t)) + t + _I32.pack(partition)


def _parse_partition_key(key: bytes) -> Key:
    at = len(SHARE_PARTITION)
    (glen,) = _U16.unpack_from(key, at)
    group = key[at + 2:at + 2 + glen].decode()
    at += 2 + glen
    (tlen,) = _U16.unpack_from(key, at)
    topic = key[at + 2:at + 2 + tlen].decode()
    (partition,) = _I32.unpack_from(key, at + 2 + tlen)
    return group, topic, partition


def config_key(group: str, name: str) -> bytes:
    g = group.encode()
    return GROUP_CONFIG + _U16.pack(len(g)) + g + name.encode()


class ShareCoordinator:
    def __init__(self, settings: ShareSettings = ShareSettings(), *, groups: GroupCoordinator | None = None,
                 state: StateBackend | None = None) -> None:
        self.settings = settings
        self.groups = groups  # the classic and consumer-protocol groups, for clashing ids
        self.state = state  # None: in memory only (unit tests)
        self.share_groups: dict[str, ShareGroup] = {}
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.configs: dict[str, dict[str, str]] = {}  # group -> its configs set by IncrementalAlterConfigs
        self._configs_seen = -1  # the store's group_config_changes when `configs` was last read from it
        self._saved: dict[Key, bytes] = {}
        self._loaded = state is None
        self._wakeup = trio.Event()
        self._scheduled = math.inf
        self.available = trio.Event()  # set (and replaced) whenever released records can be fetched again
        self.dead_letters: DeadLetters | None = None  # where archived records go (None: nowhere)
        # the first offset of a partition this node leads stored at or after a time in ms, -1 for none
        # (ListOffsets by time; None: only earliest and latest resets)
        self.offset_for_time: Callable[[str, int, int], int] | None = None

    @staticmethod
    def now_ms() -> int:
        return math.ceil(trio.current_time() * 1000)

    @staticmethod
    def wall_ms() -> int:
        """The time records are stamped with (by_duration resets look back from it)."""
        return time.time_ns() // 1_000_000

    # ---- loading and writing ----------------------------------------------------------------------------
    def load(self) -> None:
        """The share-partitions and group configs the state topic holds (at start, and on a new master)."""
        if self._loaded:
            return
        self._loaded = True
        self._refresh_configs()
        for key, value in self.state.state_items(SHARE_PARTITION):
            group, topic, partition = _parse_partition_key(key)
            self.partitions[(group, topic, partition)] = decode(value, **self._partition_settings(group))
            self._saved[(group, topic, partition)] = value

    async def flush_dead(self, keys: Iterable[Key]) -> None:
        """Write the records these share-partitions archived (rejected, or past the delivery limit)
        to their group's dead-letter topic, if it has one (broker/groups/dead_letters.py)."""
        for key in set(keys):
            part = self.partitions.get(key)
            dead = part.take_dead() if part is not None else []
            group, topic, partition = key
            dlq = self.config(group, "errors.deadletterqueue.topic.name") if dead else ""
            if dlq and self.dead_letters is not None:
                copy = self.config(group, "errors.deadletterqueue.copy.record.enable").lower() == "true"
                await self.dead_letters.send(group, dlq, copy, topic, partition, dead)

    async def persist(self, keys: Iterable[Key]) -> int:
        """Write the share-partitions that changed, in one fsynced append; NOT_COORDINATOR when the
        store refused it (the caller answers that instead of the acknowledgement)."""
        records = []
        for key in set(keys):
            part = self.partitions.get(key)
            if part is None:
                continue
            value = encode(part)
            if self._saved.get(key) != value:
                records.append((key, partition_key(*key), value))
        if not records or self.state is None:
            return ErrorCode.NONE
        try:
            await trio.to_thread.run_sync(self.state.write_state, [(k, v) for _, k, v in records])
        except StoreError:
            return ErrorCode.NOT_COORDINATOR
        for key, _, value in records:
            self._saved[key] = value
        return ErrorCode.NONE

    # ---- group configs ----------------------------------------------------------------------------------
    def config(self, group: str, name: str) -> str:
        """A group config in force: the group's own, else its default (the broker's setting)."""
        value = self.group_config(group, name)
        if value is not None:
            return value
        default = GROUP_CONFIGS[name]
        if default is not None:
            return default
        s = self.settings
        return str({"share.record.lock.duration.ms": s.lock_ms, "share.delivery.count.limit": s.delivery_limit,
                    "share.session.timeout.ms": s.membership.session_timeout_ms,
                    "share.heartbeat.interval.ms": s.membership.heartbeat_interval_ms,
                    "consumer.session.timeout.ms": s.consumer.session_timeout_ms,
                    "consumer.heartbeat.interval.ms": s.consumer.heartbeat_interval_ms}[name])

    def group_config(self, group: str, name: str) -> str | None:
        """A config set for `group` (None: not set; the broker's setting applies)."""
        self._refresh_configs()
        return self.configs.get(group, {}).get(name)

    async def set_configs(self, group: str, changes: Mapping[str, str | None]) -> None:
        """Set (or with None, delete) group configs, durably, through `write_configs` (in a cluster:
        for every broker group, as ACLs); raises StoreError when refused."""
        if self.state is not None:
            await self.write_configs([(config_key(group, n), None if v is None else v.encode())
                                      for n, v in changes.items()])
            self._refresh_configs()
            return
        current = self.configs.setdefault(group, {})
        for name, value in changes.items():
            if value is None:
                current.pop(name, None)
            else:
                current[name] = value
        self._apply_settings(group)

    async def write_configs(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Where group config records go (the broker sets the topology's: in a cluster, every broker
        group's commitlog through ZooKeeper, as ACLs)."""
        await trio.to_thread.run_sync(self.state.write_state, records)

    def _refresh_configs(self) -> None:
        """The group configs as the state topic holds them, when its group config records moved (written
        here, or at another node of the cluster and replicated or taken from ZooKeeper); the
        share-partitions of a changed group take its new settings."""
        if self.state is None or self._configs_seen == self.state.group_config_changes:
            return
        self._configs_seen = self.state.group_config_changes
        configs: dict[str, dict[str, str]] = {}
        for key, value in self.state.state_items(GROUP_CONFIG):
            at = len(GROUP_CONFIG)
            (glen,) = _U16.unpack_from(key, at)
            group = key[at + 2:at + 2 + glen].decode()
            configs.setdefault(group, {})[key[at + 2 + glen:].decode()] = value.decode()
        changed = {g for g in set(configs) | set(self.configs) if configs.get(g) != self.configs.get(g)}
        self.configs = configs
        for group in changed:
            self._apply_settings(group)

    def configs_of(self, group: str) -> dict[str, str]:
        """The configs set for `group` (a copy)."""
        self._refresh_configs()
        return dict(self.configs.get(group, {}))

    def _apply_settings(self, group: str) -> None:
        settings = self._partition_settings(group)
        for (g, _, _), part in self.partitions.items():
            if g == group:
                part.lock_ms, part.delivery_limit = settings["lock_ms"], settings["delivery_limit"]
                part.release_delays_ms = settings["release_delays_ms"]

    def _partition_settings(self, group: str) -> dict:
        return {"lock_ms": int(self.config(group, "share.record.lock.duration.ms")),
                "delivery_limit": int(self.config(group, "share.delivery.count.limit")),
                "max_in_flight": self.settings.max_in_flight,
                "release_delays_ms": release_delays(self.config(group, "gregor.share.release.delay.ms"))}

    def _membership(self, group: str) -> Settings:
        return Settings(int(self.config(group, "share.session.timeout.ms")),
                        int(self.config(group, "share.heartbeat.interval.ms")), self.settings.membership.max_size)

    # ---- membership -------------------------------------------------------------------------------------
    def has_group(self, group_id: str) -> bool:
        """Is this id a share group's (the group coordinator refuses it to other kinds of group)?"""
        self.load()
        return group_id in self.share_groups

    def clashes(self, group_id: str) -> bool:
        """Is the id taken by a classic group with members or a consumer-protocol group?"""
        if self.groups is None:
            return False
        return group_id in self.groups.consumer_groups or self.groups.classic_in_use(group_id)

    async def heartbeat(self, group_id: str, beat: ShareHeartbeat, topics: Mapping[str, int],
                        offsets: Offsets) -> ShareAnswer:
        if not group_id:
            return ShareAnswer(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
        self.load()
        if group_id not in self.share_groups and self.clashes(group_id):
            return ShareAnswer(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        group = self.share_groups.get(group_id)
        if group is None:
            if beat.member_epoch not in (0,):
                return ShareAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {beat.member_id} is not a member of group {group_id}.")
            group = self.share_groups[group_id] = ShareGroup(group_id, self._membership(group_id))
        group.settings = self._membership(group_id)
        answer = group.heartbeat(self.now_ms(), beat, topics)
        if answer.error == ErrorCode.NONE and beat.member_epoch == -1:
            self._member_gone(group_id, beat.member_id)
        if answer.assignment:
            changed = [self._initialize(group_id, t, p, offsets) for t, ps in answer.assignment.items() for p in ps]
            error = await self.persist(k for k in changed if k is not None)
            if error:
                return ShareAnswer(error, "the share-partitions' state could not be written")
        self._reschedule(group.next_deadline())
        return answer

    def _member_gone(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        released = 0
        for (g, _, _), part in self.partitions.items():
            if g == group_id:
                released += part.release_member(member_id)
        if released:
            self._notify()


    # ---- share-partitions -------------------------------------------------------------------------------
    def _initialize(self, group: str, topic: str, partition: int, offsets: Offsets) -> Key | None:
        """The share-partition's start, the first time the group reads it: share.auto.offset.reset
        ("latest": the high watermark, "earliest": the log start, "by_duration:D": the first record
        stored at or after now - D). None: not led here, or known."""
        key = (group, topic, partition)
        if key in self.partitions:
            return None
        bounds = offsets(topic, partition)
        if bounds is None:
            return None
        log_start, high_watermark = bounds
        reset = self.config(group, "share.auto.offset.reset")
        if reset == "earliest":
            start = log_start
        elif reset.startswith(BY_DURATION) and self.offset_for_time is not None:
            # the first record stored at or after now - duration (none: the high watermark)
            found = self.offset_for_time(topic, partition, self.wall_ms() - reset_duration_ms(reset))
            start = high_watermark if found < 0 else max(found, log_start)
        else:
            start = high_watermark
        self.partitions[key] = SharePartition(start, **self._partition_settings(group))
        return key

    def partition(self, group: str, topic: str, partition: int, offsets: Offsets) -> SharePartition | None:
        self.load()
        self._initialize(group, topic, partition, offsets)
        part = self.partitions.get((group, topic, partition))
        if part is not None and part.start < (bounds := offsets(topic, partition) or (part.start, 0))[0]:
            part.skip_to(bounds[0])  # retention or DeleteRecords removed records it had not delivered
        return part

    def acquire(self, group: str, member: str, topic: str, partition: int, max_records: int,
                fetchable_end: int, offsets: Offsets) -> list[tuple[int, int, int]]:
        part = self.partition(group, topic, partition, offsets)
        if part is None:
            return []
        runs = part.acquire(self.now_ms(), member, max_records, fetchable_end)
        self._reschedule(part.next_deadline())
        return runs

    def archive_aborted(self, group: str, member: str, topic: str, partition: int, first: int, last: int) -> None:
        """Offsets a read_committed group just acquired that belong to an aborted transaction."""
        part = self.partitions.get((group, topic, partition))
        if part is not None:
            part.archive_aborted(member, first, last)

    def acknowledge(self, group: str, member: str, topic: str, partition: int,
                    batches: Iterable[tuple[int, int, list[int]]]) -> int:
        """Apply a partition's AcknowledgementBatches; INVALID_RECORD_STATE if any offset is not
        acquired by the member (the valid batches before it still apply, as in Kafka)."""
        part = self.partitions.get((group, topic, partition))
        if part is None:
            return ErrorCode.INVALID_RECORD_STATE
        now = self.now_ms()
        error = ErrorCode.NONE
        released = False
        for first, last, types in batches:
            if not part.acknowledge(now, member, first, last, list(types)):
                error = ErrorCode.INVALID_RECORD_STATE
            elif RELEASE in types:
                released = True
        if released:
            self._notify()
        return error

    # ---- share sessions ---------------------------------------------------------------------------------
    def session(self, group: str, member: str, epoch: int, wanted: Iterable[tuple[str, int]],
                forgotten: Iterable[tuple[str, int]], *, acknowledge_only: bool = False) -> ShareSession | None:
        """The member's session after this request (Kafka's ShareSessionCache.maybeCreateSession and
        friends): epoch 0 opens a new one, -1 closes it (None), any other must be the next expected."""
        key = (group, member)
        if epoch == 0:
            if acknowledge_only:
                raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "A new share session cannot acknowledge.")
            if key not in self.sessions and len(self.sessions) >= self.settings.max_sessions:
                raise SessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                   "The limit of share sessions has been reached.")
            session = self.sessions[key] = ShareSession(1, set(wanted))
            return session
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "The share session was not found.")
        if epoch == -1:
            del self.sessions[key]
            return None
        if epoch != session.epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "The share session epoch is invalid.")
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.partitions |= set(wanted)
        session.partitions -= set(forgotten)
        return session

    # ---- describing and deleting --------------------------------------------------------------------------
    def describe(self, group_id: str) -> ShareGroup | None:
        self.load()
        return self.share_groups.get(group_id)

    def group_state(self, group_id: str) -> str:
        """Kafka's name for the share group's state: Stable with members, else Empty."""
        group = self.share_groups.get(group_id)
        return "Stable" if group is not None and group.members else "Empty"

    def known_groups(self) -> set[str]:
        self.load()
        return set(self.share_groups) | {g for g, _, _ in self.partitions}

    def group_partitions(self, group_id: str) -> dict[tuple[str, int], SharePartition]:
        self.load()
        return {(t, p): part for (g, t, p), part in self.partitions.items() if g == group_id}

    async def delete(self, group_id: str) -> int:
        """DeleteGroups / DeleteShareGroupState: an empty share group's state goes."""
        group = self.share_groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        keys = [k for k in self.partitions if k[0] == group_id]
        if group is None and not keys:
            return ErrorCode.GROUP_ID_NOT_FOUND
        error = await self._drop(keys)
        if not error:
            self.share_groups.pop(group_id, None)
        return error

    async def forget_topic(self, group_id: str, topic: str) -> int:
        """DeleteShareGroupOffsets: the group's state of the topic goes (its next read starts anew)."""
        return await self._drop([k for k in self.partitions if k[0] == group_id and k[1] == topic])

    async def _drop(self, keys: list[Key]) -> int:
        """Forget these share-partitions, their state records deleted first (NOT_COORDINATOR if refused)."""
        if self.state is not None and keys:
            try:
                await trio.to_thread.run_sync(self.state.write_state, [(partition_key(*k), None) for k in keys])
            except StoreError:
                return ErrorCode.NOT_COORDINATOR
        for key in keys:
            del self.partitions[key]
            self._saved.pop(key, None)
        return ErrorCode.NONE

    async def reset(self, group_id: str, topic: str, partition: int, offset: int) -> int:
        """AlterShareGroupOffsets: the share-partition starts again at `offset` (an empty group only)."""
        group = self.share_groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        self.partitions[(group_id, topic, partition)] = SharePartition(offset, **self._partition_settings(group_id))
        return await self.persist([(group_id, topic, partition)])

    # ---- the clock --------------------------------------------------------------------------------------
    def _notify(self) -> None:
        self.available.set()
        self.available = trio.Event()

    def _reschedule(self, deadline: int | None) -> None:
        if deadline is not None and deadline < self._scheduled:
            self._wakeup.set()

    def _next_deadline(self) -> float:
        deadlines = [d for g in self.share_groups.values() if (d := g.next_deadline()) is not None]
        deadlines += [d for p in self.partitions.values() if (d := p.next_deadline()) is not None]
        return min(deadlines, default=math.inf)

    async def run(self, topics: Callable[[], Mapping[str, int]]) -> None:
        """Remove members whose session ran out and release records whose lock did, as they fall due."""
        self.load()
        while True:
            self._scheduled = self._next_deadline()
            with trio.move_on_at(self._scheduled / 1000):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = self.now_ms()
            released = 0
            for group_id, group in list(self.share_groups.items()):
                for member_id in group.expire(now, topics()):
                    self._member_gone(group_id, member_id)
            changed = []
            for key, part in self.partitions.items():
                if part.expire(now):
                    released += 1
                    changed.append(key)
            if released:
                self._notify()
                if not await self.persist(changed):  # a refusal: written with the partition's next change
                    await self.flush_dead(changed)
