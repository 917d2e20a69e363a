"""A broker group's decisions, sans-IO: who is master, who is in the sync-state set, where a
returning replica's log stops agreeing with its master's.

broker/cluster/node.py reads ZooKeeper and the followers' progress, asks these functions what to do,
and does it; nothing here touches a socket, a thread or a clock (time is passed in), so every
failure case is a plain unit test (tests/cluster/test_cluster_state.py).

The group's record (znode /groups/<name>/state, written only by compare-and-set on its version):
the master's node id, the master epoch (Kafka's leader epoch, the same for every partition of the
group) and the sync-state set (RocketMQ 5's SyncStateSet, Kafka's ISR). Safety rests on three rules:
- a master is chosen only from the sync-state set, and only while its master's live node is gone;
- the master shrinks the set in ZooKeeper before its high watermark stops waiting for the node
  removed, and adds a node only once it holds everything below the high watermark;
- every write names the version read, so a master deposed meanwhile fails its write and steps down.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupRecord:
    master: int
    epoch: int
    sync_state_set: tuple[int, ...]

    def encode(self) -> bytes:
        return json.dumps({"version": 1, "master": self.master, "epoch": self.epoch,
                           "sync_state_set": sorted(self.sync_state_set)}).encode()

    @classmethod
    def decode(cls, data: bytes) -> GroupRecord:
        obj = json.loads(data)
        return cls(int(obj["master"]), int(obj["epoch"]), tuple(sorted(int(n) for n in obj["sync_state_set"])))

    def with_set(self, nodes: set[int] | frozenset[int]) -> GroupRecord:
        return GroupRecord(self.master, self.epoch, tuple(sorted(nodes)))


@dataclass(frozen=True)
class Snapshot:
    """What ZooKeeper said at one moment: the live nodes of the group and its record."""

    live: frozenset[int]
    record: GroupRecord | None
    version: int  # the record's znode version; -1: no record yet


@dataclass(frozen=True)
class Lead:
    epoch: int


@dataclass(frozen=True)
class Follow:
    master: int
    epoch: int


@dataclass(frozen=True)
class Claim:
    """Write `record` if the znode is still at `version` (-1: create it); then lead."""

    record: GroupRecord
    version: int


@dataclass(frozen=True)
class Wait:
    """No master can be chosen now (the master is gone and this node is not in the set)."""

    reason: str


Action = Lead | Follow | Claim | Wait


def decide(me: int, snap: Snapshot, leading_epoch: int | None) -> Action:
    """What node `me` does, given ZooKeeper's state and the epoch it leads in now (None: it does
    not lead)."""
    rec = snap.record
    if rec is None:  # the group's first node: master in epoch 1, alone in the set
        return Claim(GroupRecord(me, 1, (me,)), -1)
    if rec.master == me:
        if leading_epoch == rec.epoch:
            return Lead(rec.epoch)
        # this node restarted (or lost its session) while still recorded as master: nobody took
        # over, so it leads again in a new epoch, which fences anything of its old incarnation
        return Claim(GroupRecord(me, rec.epoch + 1, tuple(sorted(set(rec.sync_state_set) | {me}))), snap.version)
    if rec.master in snap.live:
        return Follow(rec.master, rec.epoch)
    if me in rec.sync_state_set:
        survivors = set(rec.sync_state_set) - {rec.master}
        return Claim(GroupRecord(me, rec.epoch + 1, tuple(sorted(survivors))), snap.version)
    return Wait(f"master {rec.master} is gone and node {me} is not in the sync-state set "
                f"{list(rec.sync_state_set)}: waiting for one of those nodes")


def truncation_point(master_epochs: list[tuple[int, int]], master_end: int, follower_epoch: int,
                     follower_end: int) -> int:
    """Where a follower's commitlog stops agreeing with its master's: the end, on the master,
    of the newest epoch the follower has (the start of the master's next epoch, or the master's
    log end), or the follower's own end if that comes first. Positions are the same on every
    replica, so one comparison finds it (Kafka's OffsetForLeaderEpoch, per commitlog rather
    than per partition)."""
    later = [start for epoch, start in master_epochs if epoch > follower_epoch]
    end = min(later) if later else master_end
    return min(end, follower_end)


@dataclass
class Progress:
    position: int = 0  # the follower holds the commitlog below this
    caught_up_ms: int = 0  # when it last reported holding at least the log end of its previous report
    previous_log_end: int = 0
    connected: bool = False


@dataclass
class SyncState:
    """The master's view of its followers: their progress, the sync-state set in force, and what
    to change in it. `sync_state_set` holds the master too."""

    me: int
    sync_state_set: frozenset[int]
    lag_ms: int
    now_ms: int
    followers: dict[int, Progress] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in self.sync_state_set - {self.me}:  # a grace of lag_ms to connect after an election
            self.followers[node] = Progress(caught_up_ms=self.now_ms)

    def fetched(self, node: int, position: int, log_end: int, now_ms: int) -> None:
        """Follower `node` reports holding the log below `position` (replication HOLDS)."""
        p = self.followers.setdefault(node, Progress(caught_up_ms=now_ms))
        p.connected = True
        p.position = position  # as Kafka: a follower that lost a tail counts with what it holds now
        if position >= p.previous_log_end:
            p.caught_up_ms = now_ms
        p.previous_log_end = log_end

    def disconnected(self, node: int) -> None:
        p = self.followers.get(node)
        if p is not None:
            p.connected = False

    def hw_position(self, log_end: int) -> int:
        """What every member of the sync-state set holds."""
        return min([log_end] + [self.followers[n].position if n in self.followers else 0
                                for n in self.sync_state_set if n != self.me])

    def drained(self, log_end: int) -> bool:
        """Does every member of the set whose stream is open hold the log below `log_end`? (A
        clean stop's drain: a member whose stream closed is stopping or gone, and is not
        waited for.)"""
        return all(p.position >= log_end for n, p in self.followers.items()
                   if n in self.sync_state_set and n != self.me and p.connected)

    def wanted_set(self, log_end: int, now_ms: int, live: Collection[int] | None = None) -> frozenset[int]:
        """The sync-state set as it should be: members that have not caught up within lag_ms
        leave, and so do members gone from `live` (their ZooKeeper session ended: a clean stop
        closes it, a crash lets it time out) whose stream is closed, at once, as Kafka's
        controller takes a broker whose session ended out of every ISR; connected followers
        holding everything below the high watermark join."""
        def stays(n: int) -> bool:
            p = self.followers.get(n, Progress())
            return now_ms - p.caught_up_ms <= self.lag_ms and (live is None or n in live or p.connected)

        hw = self.hw_position(log_end)
        keep = {n for n in self.sync_state_set if n == self.me or stays(n)}
        join = {n for n, p in self.followers.items()
                if n not in self.sync_state_set and p.connected and p.position >= hw
                and now_ms - p.caught_up_ms <= self.lag_ms}
        return frozenset(keep | join)


# ---- several broker groups: where partitions and coordinators live --------------------------
@dataclass(frozen=True)
class TopicRecord:
    """A topic as ZooKeeper holds it (/topics/<name>): every group's master creates it in its own
    commitlog with this id and these configs, and serves the partitions placed on its group."""

    topic_id: str
    placement: tuple[str, ...]  # partition -> broker group
    configs: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps({"version": 1, "topic_id": self.topic_id, "partitions": list(self.placement),
                           "configs": self.configs}).encode()

    @classmethod
    def decode(cls, data: bytes) -> TopicRecord:
        obj = json.loads(data)
        return cls(obj["topic_id"], tuple(obj["partitions"]), dict(obj.get("configs", {})))


def groups_with_master(groups: dict[str, tuple[GroupRecord | None, list[int]]], own: str) -> list[str]:
    """The groups that have had a master (the ones partitions and coordinators go to), from
    ZooKeeper's records by group name; `own` always (its master is about to be, or is, this node)."""
    names = [name for name, (record, _) in groups.items() if record is not None]
    return names if own in names else [*names, own]


def place(topic: str, have: tuple[str, ...], total: int, groups: list[str]) -> tuple[str, ...]:
    """Partitions `len(have)`..`total - 1` spread round-robin over the groups, from a group the
    topic's name picks, so topics of few partitions do not all start on the same group."""
    names = sorted(groups)
    start = zlib.crc32(topic.encode()) % len(names)
    return have + tuple(names[(start + i) % len(names)] for i in range(len(have), total))


def coordinator_group(key: str, groups: list[str]) -> str:
    """The broker group whose master coordinates a consumer group or transactional id (Kafka
    hashes the key onto a partition of __consumer_offsets; here onto a group)."""
    names = sorted(groups)
    return names[zlib.crc32(key.encode()) % len(names)]
