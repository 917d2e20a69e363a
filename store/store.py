"""The Store facade: topics, the append path, reads and lookups over commitlog + consume queues.

Owns wiring the parts together, the append lock (one writer at a time), and the background
threads' lifecycle (allocator, flusher, retention). Never does network I/O and never imports
the broker; every call is plain blocking Python the broker may run off its event loop.
"""

from __future__ import annotations

import bisect
import errno
import json
import logging
import os
import resource
import shutil
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from protocol.record_batch import TRANSACTIONAL_BIT, BatchHeader, end_transaction_marker, parse_header
from store import legacy, msgid, records, recovery, retention
from store.atomic_file import fsync_dir, replace
from store.checkpoint import Checkpoint, mark_clean, queue_key, take_clean_mark
from store.commitlog import CommitLog
from store.compaction import Cleaner, CleanStats, Policy
from store.config import StoreConfig
from store.consume_queue import CORRUPT, ConsumeQueue
from store.data_dir import (
    START_OVER_FILE,
    adopt_legacy_topics,
    discard_derived_and_log,
    lock_data_dir,
    remove_stray_queues,
)
from store.dispatch import (
    ATTRIBUTES_LOW,
    CONTROL_BIT,
    TXN_BITS,
    KeyDispatcher,
    note_epoch,
    rederive_transactions,
    relocate,
    reserve_marker,
    tags_of,
    to_queue,
    to_transactions,
)
from store.entry import ENTRY_AT_BATCH, ENTRY_HEADER, MAGIC_DATA, RELOCATED, EntryHeader, crc_of, read_entry
from store.errors import (
    AdminBusy,
    CorruptData,
    CorruptEntry,
    LogDirOffline,
    OffsetOutOfRange,
    QueueFilesUnavailable,
    ReplicationError,
    StorageFull,
    StoreError,
    UnknownPartition,
    UnknownTopic,
)
from store.flush import Flusher
from store.key_index import KeyIndex
from store.offsets import OffsetStore
from store.partition import Partition, cleanup_policy, features, irregular, queue_dir
from store.periodic import Periodic
from store.records import StoredRecord
from store.replica import Unreplicated
from store.reserver import QueueReserver
from store.results import AppendResult, ReadResult
from store.segment import Segment, sync_filesystem
from store.state import (
    MASTER_EPOCH,
    STATE_TOPIC,
    Record,
    StateView,
    decode_master_epoch,
    encode_batch,
    encode_master_epoch,
    encode_topic,
    topic_key,
)
from store.time_index import TimeIndex, max_timestamp_offset, offset_for_timestamp
from store.topics import TopicMeta, TopicRegistry

__all__ = ["AppendResult", "ReadResult", "Store"]  # the results are store/results.py's, re-exported

log = logging.getLogger(__name__)
_BASE = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")
_PRODUCER_ID = struct.Struct(">q")  # at 43
FULL_WARNING_INTERVAL_S = 10.0  # one "out of disk space" line per this many seconds
# A checkpoint with at least this many moved queues syncs the data directory's file system once
# (store/segment.py: sync_filesystem) instead of msyncing each queue's mapping: with 10,000
# partitions each moved queue cost a syscall and a flush of its own every checkpoint
SYNCFS_FROM_QUEUES = 64
KEY_LOOKUP_WAIT_S = 1.0  # lookup_key waits at most this long for the key index to reach the log's end
STATE_CHUNK = 10_000  # state records per batch when many are written at once (migration, carrying)


# The append path builds its result with tuple.__new__, a C call: the NamedTuple's own
# __new__ is a Python function, about 0.25 us of a 3 us append.
_new_tuple = tuple.__new__
_time_ns = time.time_ns


class Store:
    def __init__(self, root: Path, config: StoreConfig, view: StateView, commitlog: CommitLog,
                 partitions: dict[tuple[str, int], Partition], key_index: KeyIndex,
                 key_position: int | None = None) -> None:
        self.root = root
        self.config = config
        self._view = view
        self._registry = registry = view.registry
        # state records are appended and applied to the view one writer at a time, so the view
        # changes in commitlog order
        self._state_lock = threading.Lock()
        self._log = commitlog
        # Partitions by topic, each list indexed by partition number, so the append path finds
        # one with a str-keyed dict and a list index. Keyed by (topic, partition) tuples, the
        # lookup cost about 0.2 us more per append at 10,000 partitions (bench, A/B): hashing
        # the tuple and comparing it with the stored key touch objects out of the CPU cache.
        self._parts: dict[str, list[Partition]] = {
            meta.name: [partitions[(meta.name, p)] for p in range(meta.partitions)]
            for meta in recovery.metas(registry)}
        for part in partitions.values():  # this store leads in the newest epoch it knows
            part.leader_epoch = max(0, part.epochs.latest_epoch)
        self._key_index = key_index
        # keys are indexed off the write path, following the commitlog from where the index ends
        self._keys = KeyDispatcher(commitlog, key_index,
                                   commitlog.write_position if key_position is None else key_position,
                                   self._keys_indexed, self._any_keys_indexed, self._key_indexed_ids)
        self._lock = threading.Lock()
        # Topic changes (create, add partitions, alter, delete) take turns under this lock and
        # make or remove files outside the append lock, which they take only to publish.
        self._admin_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._checkpointed: dict[str, tuple[int, int]] = {}  # queue bounds in the last checkpoint
        self._checkpointer = Periodic("checkpoint", config.checkpoint_interval_ms / 1000, self.write_checkpoint)
        self._subscribers: list[Callable[[str, int], None]] = []
        self._last_ts = 0
        self._full_warned = -FULL_WARNING_INTERVAL_S
        self._sync = config.flush_mode == "sync"
        self._closed = False
        self._dir_lock: int | None = None  # the data directory's .lock (open)
        self.offline: LogDirOffline | None = None  # set once, when an fsync or a write failed
        # Replication (broker/cluster/node.py): appends the in-sync replicas may not hold yet, None on
        # a single node; and whether this store follows a master (it then writes nothing of its
        # own: no retention carries, no log cleaner, only the master's shipped bytes)
        self._unreplicated: Unreplicated | None = None
        self.following = False
        self._default_epoch = 0  # the epoch a new partition is led in (begin_master_epoch)
        # A follower starting over from its master's copy (start_over): the position its copy is
        # derived at, and the master's queue bounds there; None otherwise
        self._start_over: tuple[int, dict[str, tuple[int, int]]] | None = None
        self.offsets: OffsetStore = view.offsets
        self.offsets.attach(self.write_state)
        commitlog.start_allocator()
        self._reserver = QueueReserver()
        self._reserver.start()
        self._flusher = Flusher(self._sync, config.flush_interval_ms / 1000, self._lock,
                                lambda: self._log.write_position, self._log.flush, self._go_offline)
        self._retention = Periodic("retention", config.retention_check_interval_ms / 1000, self.enforce_retention)
        self._retention.start()
        self.cleaner = Cleaner(self)
        self._cleaning = Periodic("log-cleaner", config.cleaner_backoff_ms / 1000, self.clean)
        if config.cleaner_enable:
            self._cleaning.start()
        self._keys.start()

    # ---- lifecycle -------------------------------------------------------------------
    @classmethod
    def open(cls, data_dir: str | Path, config: StoreConfig) -> Store:
        """Open (recover, migrate) the store in `data_dir`. One process at a time: the data
        directory's `.lock` is held until close (Kafka's log directories have one too), so a
        second broker or `gregor user add` on a live data dir is refused with StoreError."""
        config.validate()
        root = Path(data_dir)
        root.mkdir(parents=True, exist_ok=True)
        lock = lock_data_dir(root)
        try:
            store = cls._open(root, config)
        except BaseException:
            os.close(lock)
            raise
        store._dir_lock = lock
        return store

    @classmethod
    def _open(cls, root: Path, config: StoreConfig, into: Store | None = None,
              bounds: dict[str, tuple[int, int]] | None = None) -> Store:
        """Recover the store in `root` (into `into`, a store starting over: Store.start_over);
        a rebuild takes the queue bounds of partitions the commitlog has no entry of from
        `bounds` (the master's, when a follower finishes starting over)."""
        if into is None and (root / START_OVER_FILE).exists():
            log.warning("%s holds a partial copy of a master's commitlog (the node stopped while starting over "
                        "from it): discarding it; the master ships its commitlog again", root)
            discard_derived_and_log(root)
        view = StateView(TopicRegistry(), OffsetStore())
        old = legacy.read(root)
        clean = take_clean_mark(root / "clean_shutdown")
        commitlog = CommitLog(root / "commitlog", config.segment_bytes,
                              prezero=config.flush_mode == "sync", prefault=config.flush_mode == "async",
                              write_through=config.flush_mode == "sync")
        ckpt = Checkpoint.load(root / "checkpoint")
        parts = None
        trusted = False  # the derived files are exactly as the last checkpoint left them
        registry = view.registry
        if ckpt is not None:
            try:
                recovery.read_state(root, config, commitlog, ckpt, view, tail=not clean)
                adopt_legacy_topics(view, old)
                if clean:
                    parts, index = recovery.load_trusted(root, registry, config, commitlog, ckpt)
                    trusted = True
                else:
                    parts, index = recovery.recover_from_checkpoint(root, registry, config, commitlog, ckpt)
                key_position = ckpt.key_position
            except CorruptEntry as exc:
                log.warning("derived files not trusted (%s); rebuilding from the commitlog", exc)
                view.reset()
        rebuilt = parts is None
        if parts is None:
            recovery.read_state(root, config, commitlog, None, view, tail=True)
            adopt_legacy_topics(view, old)
            parts, index = recovery.rebuild(root, registry, config, commitlog,
                                            ckpt if bounds is None else Checkpoint(queues=bounds))
            key_position = commitlog.min_position  # a fresh key index: the dispatcher indexes it all
        remove_stray_queues(root / "consumequeue", registry)
        store = cls.__new__(cls) if into is None else into
        store.__init__(root, config, view, commitlog, parts, index, key_position)
        if trusted:  # a clean close msynced every queue: only later moves need it again
            store._checkpointed = dict(ckpt.queues)
        if ckpt is not None and not rebuilt:  # a rebuild may bring back what the cleaner had dropped
            store._restore_cleaner_points(ckpt)
        if old is not None:
            store._migrate(old)
        store.write_checkpoint(every_queue=not trusted)
        store._checkpointer.start()
        return store

    def _restore_cleaner_points(self, ckpt: Checkpoint) -> None:
        """Each compacted partition's cleaner point as the checkpoint saved it: after a restart
        the cleaner goes on from there instead of cleaning every partition from its log start.
        (Recovery has marked the partitions the cleaner touched: recovery._from_checkpoint.)"""
        for part in self._all_partitions():
            saved = ckpt.cleaned.get(queue_key(str(uuid.UUID(bytes=part.topic_id)), part.index))
            if saved is not None and part.compacted:
                part.cleaned_to = min(saved[0], part.queue.high_watermark)
                part.tombstone_ts = saved[1]

    def _migrate(self, old: legacy.Legacy) -> None:
        """Gregor 1's files become state records; the files go once those are durable."""
        for start in range(0, len(old.records), STATE_CHUNK):
            self.write_state(old.records[start:start + STATE_CHUNK], durable=False)
        self._make_durable()
        self.write_checkpoint(every_queue=True)  # format 4 first: it lists the state queue the next start reads
        for path in old.files:
            path.unlink(missing_ok=True)
        fsync_dir(self.root)
        log.info("migrated %s to records of the commitlog's state topic (%d records); the files are removed",
                 ", ".join(p.name for p in old.files), len(old.records))

    # ---- state records (store/state.py) ------------------------------------------------
    def write_state(self, records: list[Record], durable: bool = True) -> None:
        """Append state records as one batch of the state topic and apply them to the view
        (topics, offsets); with `durable`, return once the commitlog holds them on disk.
        Blocking: call from a worker thread. Raises a StoreError when the append is refused."""
        with self._state_lock:
            self._write_state_locked(records)
        if durable:
            self._make_durable()

    def _write_state_locked(self, records: list[Record]) -> None:
        batch = encode_batch(records, _time_ns() // 1_000_000)
        result = self.append_many(((STATE_TOPIC, 0, batch, parse_header(batch)),))[0]
        if result.__class__ is not AppendResult:
            raise result
        self._view.apply_batch(batch, result.base_offset)

    def state_value(self, key: bytes) -> bytes | None:
        """The latest value of a state key (None: never written, or deleted)."""
        return self._view.value(key)

    @property
    def acl_changes(self) -> int:
        """Moves whenever an ACL record is applied (written here, or replicated from a master)."""
        return self._view.acl_changes

    def state_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        """The live state records whose key starts with `prefix` (SCRAM credentials, say)."""
        return [(key, value) for key, (_, value) in list(self._view.live.items()) if key.startswith(prefix)]

    def _make_durable(self) -> None:
        self._flusher.flush_now()
        if self.offline is not None:
            raise self.offline

    def _carry_state(self, position: int) -> int:
        """Append again the live state records stored below commitlog `position`, before
        retention deletes the segments there: the newest value of every key survives. Returns
        the position below which segments may go: `position`, or, when the disk is too full to
        carry them all, where the oldest record not carried yet lies (segments before it hold
        no live state, and deleting them makes room to carry the rest at the next run)."""
        q = self._parts[STATE_TOPIC][0].queue
        with self._state_lock:
            records = self._view.live_below(q.first_offset_at_or_after(position))
            try:
                for start in range(0, len(records), STATE_CHUNK):
                    self._write_state_locked(records[start:start + STATE_CHUNK])
            except StorageFull as exc:
                self._warn_full(exc)
                below = self._view.live_below(q.first_offset_at_or_after(position))
                return min((q.entry(self._view.live[key][0])[0] for key, _ in below), default=position)
        if records:
            self._make_durable()
            log.info("carried %d live state records forward before deleting commitlog segments", len(records))
        return position

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_threads(wait_for_keys=True)
        self.write_checkpoint(every_queue=True)
        with self._lock:
            if self.offline is None:  # after a failed fsync nothing is known durable: recover at start
                mark_clean(self.root / "clean_shutdown")
            self._log.close()
        if self._dir_lock is not None:
            os.close(self._dir_lock)  # releases the flock
            self._dir_lock = None

    def _stop_threads(self, wait_for_keys: bool = False) -> None:
        self._checkpointer.stop()
        self._retention.stop()
        self.cleaner.stop()
        self._cleaning.stop()
        self._reserver.stop()
        if wait_for_keys:
            self._keys.wait_caught_up(5.0)  # what it has not indexed by then, it indexes at the next start
        self._keys.stop()
        self._flusher.stop()
        self._log.stop_allocator()

    def _go_offline(self, exc: OSError) -> None:
        """The flusher's fsync failed: refuse appends until restart (called by the flusher)."""
        with self._lock:
            self._set_offline(exc, "fsync")

    def _set_offline(self, exc: OSError, what: str) -> LogDirOffline:
        """Call under the append lock."""
        if self.offline is None:
            self.offline = LogDirOffline(f"log directory {self.root} is offline: commitlog {what} failed: {exc}")
            self.offline.__cause__ = exc
            log.error("log directory %s is offline: commitlog %s failed (%s); every append is refused with "
                      "KAFKA_STORAGE_ERROR, reads go on; restart the broker once the disk is fixed",
                      self.root, what, exc)
        return self.offline

    def write_checkpoint(self, every_queue: bool = False) -> None:
        """Make the commitlog and the derived files durable up to now, then save the point.

        The bounds are taken under the append lock; the fsyncs and msyncs run outside it, so
        appends go on (their bytes land beyond the bounds and are simply written early). After
        a crash, recovery trusts the queues and the key index up to these bounds and re-derives
        only the entries after this write position. Only queues that moved since the previous
        checkpoint are msynced, unless `every_queue`."""
        with self._checkpoint_lock:
            if self.offline is not None:  # a checkpoint would claim bytes durable that may not be
                return
            with self._lock:  # only copies here: appends wait for this (~0.3 us per partition)
                key_mark, key_position = self._keys.mark()
                ckpt = Checkpoint(self._log.write_position,
                                  {s.start: s.newest_timestamp for s in self._log.segments}, {},
                                  key_mark, key_position)
                ids = {meta.name: meta.topic_id for meta in recovery.metas(self._registry)}
                bounds = [(p.topic, p.index, p.queue, p.queue.log_start, p.queue.high_watermark)
                          for p in self._all_partitions()]
                histories = {(p.topic, p.index): list(p.epochs.entries) for p in self._all_partitions()
                             if len(p.epochs.entries) != 1 or p.epochs.entries[0][0] != 0}
                cleaned = {(p.topic, p.index): (p.cleaned_to, p.tombstone_ts) for p in self._all_partitions()
                           if (p.compacted and p.cleaned_to > 0) or p.relocated}
                txns = {(p.topic, p.index): (p.txns, p.txns.open.copy(), p.txns.last_aborted)
                        for p in self._all_partitions() if p.txns is not None}
            queues = []
            for topic, index, q, log_start, hw in bounds:
                if topic in ids:
                    key = queue_key(str(ids[topic]), index)
                    ckpt.queues[key] = (log_start, hw)
                    queues.append((key, q))
                    if (topic, index) in histories:
                        ckpt.epochs[key] = histories[(topic, index)]
                    if (topic, index) in cleaned:
                        ckpt.cleaned[key] = cleaned[(topic, index)]
                    if (topic, index) in txns:
                        ckpt.transactions[key] = txns[(topic, index)][1:]
            self._flusher.flush_now()
            if self.offline is not None:
                return
            moved = [q for key, q in queues if every_queue or self._checkpointed.get(key) != ckpt.queues[key]]
            if len(moved) >= SYNCFS_FROM_QUEUES:  # many files: one writeback of the file system
                sync_filesystem(self.root)
            else:
                for q in moved:
                    q.flush()
            for index, _, _ in txns.values():
                index.flush()
            with self._keys.lock:
                self._key_index.flush()
            ckpt.save(self.root / "checkpoint")
            self._checkpointed = ckpt.queues
            for topic, index, q, log_start, _ in bounds:  # now that the checkpoint has these log starts
                if (topic, index) in txns and not q.closed:
                    txns[(topic, index)][0].drop_below(log_start, self._lock)

    def wait_for_preallocation(self, timeout: float = 60.0) -> bool:
        """Block until the allocator has the next commitlog segment ready."""
        return self._log.wait_ahead(timeout)

    def flush(self) -> None:
        """Make everything appended so far durable (blocking)."""
        self._flusher.flush_now()

    def group_commit_stats(self) -> tuple[int, int]:
        """(group commits so far, appends they made durable); sync mode only, else (0, 0)."""
        return self._flusher.commits, self._flusher.committed_appends

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole expired commitlog segments, then move the log start of partitions whose
        records expired by their topic's own limits; returns how many segments were deleted.
        A segment goes once every topic's retention.ms allows it (the longest wins: a topic
        with retention.ms=-1 keeps the segments, as Kafka keeps that topic's data forever), or
        by the commitlog-wide log.retention.bytes, or earlier once it holds no live record of
        a topic with `delete` in its cleanup.policy and few live batches of compact-only
        topics (store/compaction.py's deletable_prefix). Live state records and the live
        batches of compact-only topics in the segments are appended again first. Called by
        the retention thread; the unlinks happen outside the append lock."""
        if self.following:  # the master's retention decides; its carried records arrive shipped
            return 0
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        segment_ms = self._segment_retention_ms()
        with self._lock:
            segments, active = self._log.segments, self._log.active
            count = retention.segments_to_delete(segments, active, now_ms, segment_ms, self.config.retention_bytes)
        count = max(count, self.cleaner.deletable_prefix(segments, active, self._delete_floor(),
                                                         self.config.cleaner_min_cleanable_ratio))
        boundary = segments[count].start if count else 0
        if count:  # live state records and compacted batches in those segments are appended again first
            boundary = self._carry_state(boundary)
            boundary = self.cleaner.carry(boundary)
        count = self._drop_segments_below(boundary)
        moved = self._topic_retention(now_ms, segment_ms)
        if count or moved:
            self.write_checkpoint()
        return count

    def follow_retention(self, master_start: int) -> int:
        """A follower deletes the segments wholly below its master's first commitlog position:
        the master's retention deleted them, and carried their live state records (shipped
        since). Returns how many segments went."""
        if not self.following:
            return 0
        count = self._drop_segments_below(master_start)
        if count:
            self.write_checkpoint()
        return count

    def _drop_segments_below(self, boundary: int) -> int:
        """Delete the commitlog segments that end at or below `boundary`; queues, the key index
        and log starts follow. The unlinks happen outside the append lock."""
        with self._lock:
            count = sum(1 for seg in self._log.segments if seg.end <= boundary)
            gone = self._log.detach_oldest(count) if count else []
            min_position = self._log.min_position
            if count:
                with self._keys.lock:
                    self._key_index.drop_below(min_position)
            parts = self._all_partitions()
        if count:
            for part in parts:
                q = part.queue
                if irregular(part):  # positions out of offset order (relocated batches)
                    with self._lock:
                        q.forget_below(min_position, part.deletes)
                    part.time_index = None
                else:
                    q.advance_log_start(q.first_offset_at_or_after(min_position))
            for seg in gone:
                seg.drop(unlink=True)
            log.info("retention deleted %d commitlog segment(s); log now starts at %d", count, min_position)
        return count

    def _delete_floor(self) -> int:
        """The lowest commitlog position of a live record of a topic with `delete` in its
        cleanup.policy (the state topic's are carried, compact-only topics' too)."""
        floor = self._log.write_position
        for part in self._all_partitions():
            q = part.queue
            if part.internal or not part.deletes or q.log_start >= q.high_watermark:
                continue
            if irregular(part):
                _, positions, _ = q.live(q.log_start, q.high_watermark)
                if len(positions):
                    floor = min(floor, int(positions.min()))
            else:
                floor = min(floor, q.entry(q.log_start)[0])
        return floor

    def _segment_retention_ms(self) -> int:
        """How old a commitlog segment may get: the longest retention.ms of any topic that
        deletes (-1: forever), at least log.retention.ms. A compact-only topic does not count:
        its live batches are carried forward before a segment goes."""
        limits = [self.config.retention_ms]
        for meta in self._registry.topics.values():
            if not deletes(meta.configs):
                continue
            if "retention.ms" in meta.configs:
                limits.append(int(meta.configs["retention.ms"]))
        return -1 if min(limits) < 0 else max(limits)

    def _topic_retention(self, now_ms: int, segment_ms: int) -> int:
        """Each topic's own retention.ms and retention.bytes, at batch granularity: a partition's
        log start moves past its batches whose timestamps are all older than now - retention.ms
        (Kafka's rule for a segment's largest timestamp), and past its oldest batches while the
        rest exceed retention.bytes. Topics without retention.ms follow log.retention.ms here
        only when segments live longer than that (another topic's longer retention keeps them).
        The bytes stay until their commitlog segment expires (MetaQ deletes whole shared
        segments), unreadable below the log start. Returns how many partitions moved."""
        moved = 0
        for name, meta in list(self._registry.topics.items()):
            if not deletes(meta.configs):
                continue  # compact only: neither time nor size deletes its records
            if "retention.ms" in meta.configs:
                limit_ms = int(meta.configs["retention.ms"])
            else:
                limit_ms = self.config.retention_ms if segment_ms != self.config.retention_ms else -1
            limit_bytes = int(meta.configs.get("retention.bytes", -1))
            if limit_ms < 0 and limit_bytes < 0:
                continue
            for part in list(self._parts.get(name, ())):
                q = part.queue
                start = q.log_start
                if limit_ms >= 0:
                    start = max(start, self._first_batch_not_older(part, now_ms - limit_ms))
                if limit_bytes >= 0:
                    start = max(start, _first_offset_within_bytes(q, start, limit_bytes))
                if start > q.log_start:
                    q.advance_log_start(start)
                    moved += 1
                    log.info("retention of topic %s moved partition %d's log start to %d", name, part.index, start)
        return moved

    def _first_batch_not_older(self, part: Partition, oldest_kept_ms: int) -> int:
        """Base offset of the first batch whose running maximum timestamp is >= oldest_kept_ms
        (every batch before it is wholly older); the high watermark if there is none."""
        index = self._time_index(part)
        i = bisect.bisect_left(index.maxes, oldest_kept_ms)
        return index.offsets[i] if i < len(index.offsets) else part.queue.high_watermark

    # ---- log compaction (store/compaction.py) ----------------------------------------------
    def clean(self, now_ms: int | None = None, force: bool = False) -> CleanStats:
        """One run of the log cleaner over the compacted partitions that are due (every one
        with `force`). Called by the cleaner thread every log.cleaner.backoff.ms."""
        if self.following:  # relocated batches arrive from the master's cleaner
            return CleanStats()
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        return self.cleaner.run(now_ms, force)

    def _compacted_partitions(self) -> list[tuple[Partition, Policy]]:
        out = []
        for name, meta in list(self._registry.topics.items()):
            parts = self._parts.get(name)
            if parts and parts[0].compacted:
                policy = Policy.of(meta.configs, self.config)
                out.extend((part, policy) for part in parts)
        return out

    def _append_relocated(self, part: Partition, batch: bytearray) -> tuple[int, int]:
        """Append a batch the cleaner re-encoded or carries, keeping its offsets (entry flag
        RELOCATED); returns its (position, size). Its queue entries are the caller's to move,
        once the bytes are durable. Raises a StoreError (StorageFull, offline, topic gone)."""
        header = parse_header(batch)
        with self._lock:
            if self.offline is not None:
                raise self.offline
            if part.queue.closed:
                raise self._missing(part.topic, part.index)
            now = max(_time_ns() // 1_000_000, self._last_ts)
            self._last_ts = now
            try:
                pos = self._log.append(batch, part.topic_id, part.topic_bytes, part.index, header.base_offset,
                                       header.record_count, now, header.max_timestamp,
                                       header.partition_leader_epoch, False, RELOCATED)
            except StorageFull as exc:
                self._warn_full(exc)
                raise
            except OSError as exc:
                raise self._write_failed(exc) from exc
        return pos, len(batch)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords: move the partition's log start up to `offset` (-1: the high
        watermark); returns the new log start. OffsetOutOfRange above the high watermark. The
        checkpoint written afterwards keeps it across a restart."""
        with self._admin_lock:
            q = self._partition(topic, partition).queue
            hw = q.high_watermark
            target = hw if offset == -1 else offset
            if not 0 <= target <= hw:
                raise OffsetOutOfRange(f"{topic}-{partition}: cannot delete records below {offset}, "
                                       f"the high watermark is {hw}")
            if target > q.log_start:
                with self._lock:
                    q.advance_log_start(target)
                self.write_checkpoint()
            return q.log_start

    # ---- topics ----------------------------------------------------------------------
    def topics(self) -> dict[str, TopicMeta]:
        return dict(self._registry.topics)

    def topic(self, name: str) -> TopicMeta | None:
        """One topic's metadata without copying the registry (the produce path asks per partition)."""
        return self._registry.topics.get(name)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str],
                     wait: bool = True, topic_id: uuid.UUID | None = None) -> TopicMeta:
        """Create a topic and its partitions' consume queues. The queue directories and files
        (a 1,000-partition topic: 1,000 of each, ~0.3 s here) are made outside the append lock,
        so a broker can call this from a worker thread while appends go on; the topic becomes
        visible, complete, once they are ready. With wait=False, raises AdminBusy instead of
        waiting for another topic change, and does not wait for the topic's record to be
        fsynced (for callers on an event loop). A follower gets its leader's topics, ids
        included, from the shipped state records instead (append_replicated); the master of
        another broker group creates a topic with the id the cluster gave it (`topic_id`)."""
        if not self._admin_lock.acquire(blocking=wait):
            raise AdminBusy(f"cannot create {name} now: another topic change is under way")
        try:
            self._registry.check_new(name, partitions)
            qroot = self.root / "consumequeue"
            meta = TopicMeta(name, partitions, dict(configs), topic_id or uuid.uuid4())
            try:
                shutil.rmtree(qroot / name, ignore_errors=True)  # a crash's leftovers
                queues = self._make_queues(name, range(partitions))
                with self._lock:  # listed before the record: the registry, which clients see, follows it
                    self._publish(meta, queues)
                self._put_topic(meta, durable=wait)
                return meta
            except BaseException:
                if self._registry.topics.get(name) is None:
                    self._unlist(name)
                    shutil.rmtree(qroot / name, ignore_errors=True)
                raise
        finally:
            self._admin_lock.release()

    def _put_topic(self, meta: TopicMeta, durable: bool = True) -> None:
        """The topic's record in the state topic; the view applies it to the registry."""
        self.write_state([(topic_key(meta.name), encode_topic(meta))], durable=durable)

    def add_partitions(self, name: str, total: int) -> TopicMeta:
        """Grow a topic to `total` partitions; the new queues' files are made outside the
        append lock, as in create_topic."""
        with self._admin_lock:
            old = self._registry.get(name)
            if total <= old.partitions:
                return old
            queues = self._make_queues(name, range(old.partitions, total))
            meta = TopicMeta(name, total, old.configs, old.topic_id)
            with self._lock:
                self._publish(meta, queues)
            try:
                self._put_topic(meta)
            except BaseException:  # the record was refused (full disk, offline): the new partitions go
                for part in self._unlist(name, keep=old.partitions):
                    part.queue.delete()
                    shutil.rmtree(part.queue.directory, ignore_errors=True)
                raise
            return meta

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMeta:
        with self._admin_lock:
            old = self._registry.get(name)
            meta = TopicMeta(name, old.partitions, dict(configs), old.topic_id)
            self._put_topic(meta)
            with self._lock:
                for part in self._parts[name]:
                    part.reconfigure(meta)
            return meta

    def delete_topic(self, name: str) -> None:
        """Remove a topic; its files go outside the append lock, and before any topic of the
        same name can be created again."""
        with self._admin_lock:
            self._registry.get(name)  # UnknownTopic if there is none
            self.write_state([(topic_key(name), None)])  # the registry forgets it
            self._drop_partitions(name)

    def _unlist(self, name: str, keep: int = 0) -> list[Partition]:
        """Unlist a topic's partitions from number `keep` on (all: the topic) and mark their
        queues closed; returns them, for their files to go outside the append lock."""
        with self._lock:
            parts = self._parts.get(name, [])
            doomed = parts[keep:]
            if keep:
                self._parts[name] = parts[:keep]
            else:
                self._parts.pop(name, None)
            for part in doomed:  # a read that found one before the pop checks this
                part.queue.closed = True
        return doomed

    def _drop_partitions(self, name: str) -> None:
        """Unlist a topic's partitions and delete their files (outside the append lock)."""
        for part in self._unlist(name):
            part.queue.delete()
        shutil.rmtree(self.root / "consumequeue" / name, ignore_errors=True)

    def _reconcile(self) -> None:
        """Make the partitions match the registry after state records arrived another way
        than this store's own topic calls (a leader's shipped commitlog, a truncation)."""
        for name, meta in list(self._registry.topics.items()):
            parts = self._parts.get(name)
            if parts and parts[0].topic_id != meta.topic_id.bytes:  # another incarnation
                self._drop_partitions(name)
                parts = None
            have = len(parts) if parts else 0
            if have < meta.partitions:
                queues = self._make_queues(name, range(have, meta.partitions))
                with self._lock:
                    self._publish(meta, queues)
            with self._lock:
                for part in self._parts.get(name, ()):
                    part.reconfigure(meta)
        for name in [n for n in self._parts if n != STATE_TOPIC and n not in self._registry.topics]:
            self._drop_partitions(name)

    def _make_queues(self, name: str, indexes: range) -> dict[int, ConsumeQueue]:
        """The new partitions' queues, each with its first file mapped. All or nothing: on a
        failure the ones already made are removed, and StorageFull (disk full) or
        QueueFilesUnavailable (out of open files, another I/O error) says why."""
        qroot = self.root / "consumequeue"
        made: dict[int, ConsumeQueue] = {}
        try:
            for p in indexes:
                made[p] = ConsumeQueue.create(queue_dir(qroot, name, p), self.config.queue_entries_per_file)
        except (OSError, StorageFull) as exc:  # StorageFull: no blocks for a queue's first page
            for q in made.values():
                q.delete()
            shutil.rmtree(queue_dir(qroot, name, p), ignore_errors=True)
            if isinstance(exc, StorageFull) or exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFull(f"cannot make the queue files of {name}: {exc}") from exc
            if exc.errno == errno.EMFILE:
                soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
                raise QueueFilesUnavailable(
                    f"cannot open the queue files of {name}: too many open files; every partition keeps "
                    f"one file open and this process may have {soft}: raise the limit (ulimit -n)") from exc
            raise QueueFilesUnavailable(f"cannot make the queue files of {name}: {exc}") from exc
        return made

    def _publish(self, meta: TopicMeta, queues: dict[int, ConsumeQueue]) -> None:
        """Make new partitions visible to appends and reads; call under the append lock.
        The list is replaced, not grown in place: reads look partitions up without the lock."""
        added = [Partition.of(meta, p, queues[p]) for p in sorted(queues)]  # the next numbers
        for part in added:
            part.leader_epoch = self._default_epoch
            if self._unreplicated is not None:
                part.hw = part.queue.high_watermark  # led by this store since its creation, as Kafka's first leader: epoch 0
            part.epochs.assign(part.leader_epoch, part.queue.log_start)
        self._parts[meta.name] = self._parts.get(meta.name, []) + added

    def _all_partitions(self) -> list[Partition]:
        return [part for parts in self._parts.values() for part in parts]

    def subscribe_appends(self, callback: Callable[[str, int], None]) -> None:
        """`callback(topic, partition)` when readers may see more of a partition: after an
        append, or (in a broker group) when its high watermark moves (replicated_to); called
        on the thread that appended or called replicated_to."""
        self._subscribers.append(callback)

    # ---- append ----------------------------------------------------------------------
    def append(self, topic: str, partition: int, batch: bytes | bytearray | memoryview,
               header: BatchHeader) -> AppendResult:
        """Append one batch; raises what `append_many` would return for it."""
        result = self.append_many(((topic, partition, batch, header),))[0]
        if result.__class__ is not AppendResult:
            raise result
        return result

    def append_many(self, items: Sequence[tuple[str, int, bytes | bytearray | memoryview, BatchHeader]],
                    ) -> list[AppendResult | StoreError]:
        """Append a produce request's batches, each to its own partition, under one hold of the
        append lock, with one store timestamp and one flush handle for all of them.

        Returns one entry per item, in order: its AppendResult, or the StoreError that refused
        it (UnknownTopic/UnknownPartition, StorageFull, EntryTooLarge, or an I/O error), which
        wrote nothing for that item and did not stop the others. Taking the lock, the clock and
        the call once per request instead of once per batch saves about 0.5 us of a 3 us append
        (docs/benchmarks.md). Partitions are looked up under the lock, so a concurrent
        delete_topic (which unlists them under it) is seen; tag and key parsing, for the topics
        that ask for it, also happens under it: the GIL serialises that work either way."""
        out: list = []
        parts_of = self._parts.get
        log_append = self._log.append
        appended = 0
        with self._lock:
            if self.offline is not None:
                return [self.offline] * len(items)
            unreplicated = self._unreplicated
            now = _time_ns() // 1_000_000
            if now < self._last_ts:  # store timestamps never go back (an `if`: max() costs 0.08 us)
                now = self._last_ts
            else:
                self._last_ts = now
            # the open group cannot change while the append lock is held; claimed below
            handle = self._flusher.group if self._sync else None
            for topic, partition, batch, header in items:
                parts = parts_of(topic)  # _find(), inlined: a call is ~0.1 us of an append
                if parts is None or not 0 <= partition < len(parts):
                    out.append(self._missing(topic, partition))
                    continue
                part = parts[partition]
                q = part.queue
                if q.closed:  # delete_topic unlists and closes under this lock; never write to a closed queue
                    out.append(self._missing(topic, partition))
                    continue
                # per-record work, only for the topics that ask for it; keys are indexed off
                # the write path (store/dispatch.py's KeyDispatcher)
                tags = tags_of(part, batch)
                count = header.record_count
                base = q.high_watermark
                txn = header.attributes & TXN_BITS  # transactions: the one test ordinary batches pay
                try:
                    # every page written below must have disk blocks first: a full disk is
                    # StorageFull here, before any byte is written, never SIGBUS on an mmap store
                    if base + count > q.refill_at:
                        self._reserve(q, base, count)
                    if txn and txn & CONTROL_BIT:
                        reserve_marker(part)
                    pos = log_append(batch, part.topic_id, part.topic_bytes, partition, base, count,
                                     now, header.max_timestamp, part.leader_epoch, part.internal)
                except StoreError as exc:  # StorageFull, EntryTooLarge: nothing written
                    if exc.__class__ is StorageFull:
                        self._warn_full(exc)
                    out.append(exc)
                    continue
                except OSError as exc:
                    out.append(self._write_failed(exc))
                    continue
                size = len(batch)
                to_queue(part, base, count, pos, size, tags, header.max_timestamp)
                if txn:
                    to_transactions(part, batch, base)
                end = pos + size + len(part.topic_bytes)
                if unreplicated is not None:
                    unreplicated.add(end, part, base + count)
                # tuple.__new__, a C call: the NamedTuple's own __new__ is a Python function
                out.append(_new_tuple(AppendResult, (base, base + count - 1, now, end, handle)))
                appended += 1
            if handle is not None and appended:
                self._flusher.claim(appended)
        if self._subscribers and appended:
            for (topic, partition, _, _), result in zip(items, out):
                if result.__class__ is AppendResult and topic != STATE_TOPIC:  # internal: nobody waits on it
                    for callback in self._subscribers:
                        callback(topic, partition)
        return out

    def _write_failed(self, exc: OSError) -> StoreError:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            self._warn_full(exc)
            full = StorageFull(str(exc))
            full.__cause__ = exc
            return full
        return self._set_offline(exc, "write")  # an I/O error: as Kafka, take the log directory offline

    def _reserve(self, q: ConsumeQueue, base: int, count: int) -> None:
        """Entries [base, base+count) get disk blocks now if they have none yet (this append
        waits for the disk); the reserver thread is asked to reserve further ahead."""
        if base + count > q.reserved:
            q.reserve(base, count)
        if base + count > q.refill_at:
            self._reserver.request(q)

    def _warn_full(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._full_warned >= FULL_WARNING_INTERVAL_S:
            self._full_warned = now
            log.warning("out of disk space, appends that need space are refused until some is freed: %s", exc)

    def _missing(self, topic: str, partition: int) -> Exception:
        if topic in self._registry.topics:
            return UnknownPartition(f"{topic}-{partition}")
        return UnknownTopic(topic)

    def _partition(self, topic: str, partition: int) -> Partition:
        part = self._find(topic, partition)
        if part is None:
            raise self._missing(topic, partition)
        return part

    def _find(self, topic: str, partition: int) -> Partition | None:
        parts = self._parts.get(topic)
        return parts[partition] if parts is not None and 0 <= partition < len(parts) else None

    # ---- replication: what a leader ships, what a follower applies ----------------------
    @property
    def log_end_position(self) -> int:
        """The commitlog write position: where a follower's next shipped entries go."""
        return self._log.write_position

    def read_log(self, position: int, max_bytes: int) -> tuple[int, memoryview]:
        """Whole commitlog entries from `position` for a follower, as a view over the mmap
        (CommitLog.read_entries)."""
        return self._log.read_entries(position, max_bytes)

    def log_segment_file(self, position: int) -> tuple[Path, int, int] | None:
        """(the file of the commitlog segment holding `position`, the positions it starts and
        ends at), None when no segment holds it: for a caller that sends what read_log or
        read_log_tail gave it (one segment's bytes) from the file (sendfile) rather than from
        the mapping."""
        seg = self._log.segment_at(position)
        return None if seg is None else (seg.path, seg.start, seg.end)

    def read_log_tail(self, position: int, max_bytes: int) -> memoryview | None:
        """read_log's quick case without I/O or a walk over entries, None when it does not
        apply (CommitLog.read_tail): a master calls it on its event loop for a follower close
        behind, and read_log in a worker thread otherwise."""
        return self._log.read_tail(position, max_bytes)

    def applies_in_place(self, data: bytes | bytearray, end: int | None = None) -> bool:
        """May a follower apply these shipped entries (data[:end]) on its event loop
        (append_replicated without a worker thread), as a master appends a produced batch on its
        own? Yes unless one of them is a state record (a topic's record makes its queue files,
        and every state record is reconciled against the registry) or this store is starting
        over. Every entry's header holds its topic's id, so one bytes search for the state
        topic's id answers without a walk over entries; the id turning up inside a record's
        bytes only sends the chunk to a worker thread."""
        if self._start_over is not None:
            return False
        return data.find(self._parts[STATE_TOPIC][0].topic_id, 0, end) < 0

    def splice_target(self, position: int, length: int) -> tuple[int, int] | None:
        """Where a follower may splice shipped bytes [position, position+length) into the
        commitlog's file before it applies them with apply_spliced (CommitLog.splice_target):
        (descriptor, offset), or None when they take append_replicated's way from a buffer (the
        leader rolled to a new segment, the disk has no room for them, the log directory is
        offline). Called on the event loop without the append lock (see there)."""
        if self.offline is not None:
            return None
        try:
            return self._log.splice_target(position, length)
        except (StorageFull, OSError):  # append_replicated meets it and says so
            return None

    def applies_spliced_in_place(self, position: int, length: int) -> bool:
        """applies_in_place for bytes spliced into the commitlog's file."""
        seg = self._log.segment_at(position)
        local = position - seg.start if seg is not None else 0
        return seg is not None and self._start_over is None and \
            seg.find(self._parts[STATE_TOPIC][0].topic_id, local, local + length) < 0

    def apply_spliced(self, position: int, length: int) -> int:
        """append_replicated for shipped bytes already spliced into the commitlog's file at
        `position` (splice_target): read, checked and derived from the mapping, in the same
        way, and the write position moves past them."""
        view = self._log.view(position, length)
        if view is None or len(view) != length:
            raise ReplicationError(f"spliced bytes at commitlog position {position} are not in this log")
        return self.append_replicated(position, view, written=True)

    def write_failed(self, exc: OSError) -> StoreError:
        """The error to raise for a failed write of spliced bytes (the log directory goes offline
        as with any failed commitlog write; StorageFull for a full disk)."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StorageFull(str(exc))
        with self._lock:
            return self._set_offline(exc, "write")

    def discard_spliced(self) -> None:
        """Zero bytes spliced into the commitlog's file and never applied (the stream ended)."""
        with self._lock:
            try:
                self._log.discard_spliced()
            except OSError as exc:
                raise self._set_offline(exc, "write") from exc

    def append_replicated(self, position: int, data: bytes | memoryview, written: bool = False) -> int:
        """Apply commitlog entries shipped by a leader: written byte for byte at `position`,
        then derived by the same dispatcher as an append (store/dispatch.py: consume queues now,
        keys by the key dispatcher). Entries of topics this store does not know (or another
        incarnation of) are kept in the commitlog and not derived, as recovery does. State
        records (topics, offsets) are applied as they come: the chunk is applied in pieces that
        end at each state entry, so a topic created by the leader exists before its first
        batch. Every entry must continue its partition (base offset = its high watermark),
        checked before a piece is written: ReplicationError otherwise (a diverged log:
        truncate first). `written`: the bytes already lie in the file at `position` (`data`
        is this log's mapping of them, apply_spliced). Returns the new write position."""
        if self._start_over is not None:
            return self._append_copy(position, data, written)
        view = memoryview(data)
        state_id = self._parts[STATE_TOPIC][0].topic_id
        local = piece = 0
        end = self._log.write_position
        headers: list[EntryHeader] = []  # each entry is read and CRC-checked here, once
        while local < len(view):
            e = read_entry(view, local, position)
            if not isinstance(e, EntryHeader):
                raise ReplicationError(f"shipped bytes at commitlog position {position + local} are not a valid entry")
            local += e.length
            headers.append(e)
            if e.topic_id == state_id or local == len(view):
                end = self._apply_shipped(position + piece, view[piece:local], headers, written)
                if e.topic_id == state_id:
                    with self._state_lock:
                        self._view.apply_batch(self._log.view(e.batch_position, e.batch_size), e.base_offset)
                    self._reconcile()
                piece = local
                headers = []
        return end

    def _apply_shipped(self, position: int, view: memoryview, entries: list[EntryHeader], written: bool) -> int:
        """Write one piece of shipped entries (read and checked by append_replicated) and derive it.
        Each entry's partition is looked up once, and its batch is read from the shipped bytes,
        which are the written ones: at 10,000 partitions an entry is a ~1 KiB batch, and
        a second lookup and a view over the mmap per entry were a fifth of a follower's work."""
        with self._lock:
            if self.offline is not None:
                raise self.offline
            derived: list[tuple[EntryHeader, Partition, memoryview]] = []  # offsets validated before writing
            markers: list[Partition] = []  # control batches: room for an aborted-index entry each
            next_offsets: dict[int, int] = {}
            find = self._find
            for e in entries:
                part = find(e.topic, e.partition)
                if part is None or part.topic_id != e.topic_id:
                    continue  # kept in the commitlog, not derived (as recovery does)
                at = e.position - position + ENTRY_AT_BATCH
                batch = view[at:at + e.batch_size]
                derived.append((e, part, batch))
                if e.flags & RELOCATED:
                    continue
                expected = next_offsets.get(id(part), part.queue.high_watermark)
                if e.base_offset != expected:
                    raise ReplicationError(f"{e.topic}-{e.partition}: shipped offset {e.base_offset}, this log "
                                           f"is at {expected}: the logs diverged; truncate to the last common position")
                next_offsets[id(part)] = e.base_offset + e.record_count
                part.queue.reserve(e.base_offset, e.record_count)  # disk blocks before any byte is written
                if batch[ATTRIBUTES_LOW] & CONTROL_BIT:
                    markers.append(part)
            for part in markers:
                reserve_marker(part)
            try:
                self._log.append_raw(position, view, entries, written)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise StorageFull(str(exc)) from exc
                raise self._set_offline(exc, "write") from exc
            unreplicated = self._unreplicated
            touched = []
            last_ts = self._last_ts
            for e, part, batch in derived:
                batch_position = e.position + ENTRY_AT_BATCH
                if e.flags & RELOCATED:  # the leader's cleaner moved these offsets' records
                    relocate(part, batch, batch_position, len(batch))
                    continue
                note_epoch(part, batch, e.base_offset)
                to_queue(part, e.base_offset, e.record_count, batch_position, len(batch), tags_of(part, batch),
                         e.max_timestamp)
                if unreplicated is not None:
                    unreplicated.add(e.position + e.length, part, e.base_offset + e.record_count)
                if batch[ATTRIBUTES_LOW] & TXN_BITS:
                    to_transactions(part, batch, e.base_offset)
                touched.append(part)
                last_ts = max(last_ts, e.store_timestamp)
            self._last_ts = last_ts
            end = self._log.write_position
        if unreplicated is None:  # in a broker group readers wait for the high watermark: replicated_to wakes them
            # (on the caller's thread; a follower applies in a worker thread, its event loop calls replicated_to)
            for part in dict.fromkeys(touched):
                for callback in self._subscribers:
                    callback(part.topic, part.index)
        return end

    # ---- starting over from the master's copy --------------------------------------------
    @property
    def starting_over(self) -> int | None:
        """While this follower starts over (start_over): the position its copy is derived at."""
        return None if self._start_over is None else self._start_over[0]

    def replica_bounds(self) -> tuple[int, int, dict[str, tuple[int, int]]]:
        """(first commitlog position, write position, each queue's (log start, log end) by
        queue key), taken together under the append lock: what a follower that starts over
        from this log's first position needs besides its bytes (start_over)."""
        with self._lock:
            ids = {meta.name: str(meta.topic_id) for meta in recovery.metas(self._registry)}
            queues = {queue_key(ids[p.topic], p.index): (p.queue.log_start, p.queue.high_watermark)
                      for p in self._all_partitions() if p.topic in ids}
            return self._log.min_position, self._log.write_position, queues

    def start_over(self, position: int, end: int, queues: dict[str, tuple[int, int]]) -> None:
        """Discard this follower's commitlog and everything derived from it, and hold an empty
        commitlog from `position`, its master's first position: its log ends below that (the
        master's retention deleted what it lacks), as Kafka's follower truncates fully and
        fetches from the leader's log start. The master's entries are then written as they come
        (append_replicated) and derived once the copy reaches `end` (finish_start_over), by a
        rebuild as recovery does: a topic's state record, carried forward by the master's
        retention, can follow batches of the topic. `queues` are the master's queue bounds at
        `end` (replica_bounds), for partitions the copy holds no entry of. A restart before the
        copy is derived finds START_OVER_FILE and discards the partial copy (_open)."""
        if not self.following:
            raise StoreError("only a follower starts over from its master's copy")
        copy = (end, dict(queues))
        self._start_over = copy  # no reads from here on (broker/cluster/node.py: serves_reads)
        with self._admin_lock:
            self._stop_threads()
            with self._lock:
                self._log.close()
            discard_derived_and_log(self.root)
            replace(self.root / START_OVER_FILE, json.dumps({"position": position, "end": end}).encode())
            (self.root / "commitlog").mkdir()
            Segment.create(self.root / "commitlog", position, self.config.segment_bytes,
                           prezero=self.config.flush_mode == "sync").drop(unlink=False)
            self._reopen(start_over=copy)
        log.warning("commitlog discarded: it ended below the master's first position %d; copying the master's "
                    "commitlog from there (derived once the copy reaches %d)", position, end)

    def _append_copy(self, position: int, data: bytes | memoryview, written: bool) -> int:
        """Write shipped entries while starting over: checked and written, not derived yet."""
        with self._lock:
            if self.offline is not None:
                raise self.offline
            try:
                self._log.append_raw(position, data, written=written)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise StorageFull(str(exc)) from exc
                raise self._set_offline(exc, "write") from exc
            return self._log.write_position

    def finish_start_over(self) -> None:
        """The copy reached the position start_over was given: derive everything from it (the
        queues the copy has no entry of as the master had them there; log starts no lower than
        the master's), then forget the start-over."""
        assert self._start_over is not None
        _, queues = self._start_over
        with self._admin_lock:
            self._stop_threads()
            with self._lock:
                self._log.flush(self._log.min_position, self._log.write_position)
                self._log.close()
            for name in ("checkpoint", "clean_shutdown"):
                (self.root / name).unlink(missing_ok=True)
            self._reopen(queues)
            ids = {meta.name: str(meta.topic_id) for meta in recovery.metas(self._registry)}
            with self._lock:
                for part in self._all_partitions():
                    bound = queues.get(queue_key(ids[part.topic], part.index)) if part.topic in ids else None
                    if bound is not None and part.queue.log_start < bound[0] <= part.queue.high_watermark:
                        part.queue.advance_log_start(bound[0])
            self.write_checkpoint(every_queue=True)
            (self.root / START_OVER_FILE).unlink()
            fsync_dir(self.root)
        log.info("the master's commitlog copied from %d to %d and derived", self.log_start_position,
                 self.log_end_position)

    def _reopen(self, bounds: dict[str, tuple[int, int]] | None = None,
                start_over: tuple[int, dict[str, tuple[int, int]]] | None = None) -> None:
        """Recover this store again from its files (its threads stopped, its commitlog closed),
        keeping its subscribers, its data directory lock and its part in a broker group. A
        follower serves no read until `following` is set again, after the rest."""
        subscribers, dir_lock, following = self._subscribers, self._dir_lock, self.following
        Store._open(self.root, self.config, into=self, bounds=bounds)
        self._subscribers, self._dir_lock, self._start_over = subscribers, dir_lock, start_over
        if following:
            self.replicate(following=True)

    def truncate_log(self, position: int) -> None:
        """Cut the commitlog back to `position`, an entry boundary (a returning old leader, or a
        follower whose log diverged): every partition's high watermark goes back to the first
        offset at or after it, its queue entries beyond are cleared, and the key index drops
        what points there. A checkpoint follows."""
        with self._admin_lock:
            with self._lock, self._keys.lock:
                self._log.truncate_to(position)
                for part in self._all_partitions():
                    q = part.queue
                    hw = q.first_offset_at_or_after(position)
                    cut = hw < q.high_watermark
                    if cut:
                        q.clear_after(hw)
                        q.high_watermark = hw
                        q.log_start = min(q.log_start, hw)
                        part.time_index = None
                        part.epochs.truncate_from_end(hw)
                    if part.hw is not None:
                        part.hw = min(part.hw, hw)
                    if cut and part.txns is not None:  # a marker cut off reopens its transaction
                        rederive_transactions(part, self._log)
                self._key_index.truncate_from(position)
                self._keys.position = min(self._keys.position, position)
            with self._state_lock:  # the state as the remaining records say
                self._view.reset()
                recovery.replay_state(self._parts[STATE_TOPIC][0].queue, self._log, self._view)
            self._reconcile()
            if self._unreplicated is not None:
                with self._lock:
                    self._unreplicated.pending_from(self._all_partitions(), self._log.write_position)
            self.write_checkpoint(every_queue=True)

    # ---- reads -----------------------------------------------------------------------
    def read(self, topic: str, partition: int, offset: int, max_bytes: int,
             committed: bool = False, whole_log: bool = False) -> ReadResult:
        """Batches from `offset` below the high watermark (never beyond it: what the replicas
        may not have yet stays unread); with `committed` (read_committed), below the last
        stable offset instead, so no batch of an open transaction is returned. With
        `whole_log`, up to the log end: for state derived from every batch this log holds (a
        new master's producer state, as Kafka's leader loads it from its whole log)."""
        part = self._partition(topic, partition)
        q = part.queue
        end, start = q.high_watermark, q.log_start
        hw = end if part.hw is None else part.hw
        txns = part.txns
        stable = hw if txns is None else txns.last_stable(start, hw)
        if offset < start or offset > end:  # between the high watermark and the log end: nothing yet, as Kafka
            raise OffsetOutOfRange(f"{topic}-{partition} offset {offset} outside [{start}, {end}]")
        limit = end if whole_log else stable if committed else hw
        batches: list[memoryview] = []
        total = 0
        while offset < limit:
            pos, size = q.entry(offset)
            if size == 0:  # a gap the log cleaner left (this topic is or was compacted): the next record follows
                if q.closed:  # the topic was deleted meanwhile (closed before its files go)
                    raise self._missing(topic, partition)
                offset = q.next_live(offset, limit)
                continue
            if size == CORRUPT:
                if batches:
                    break  # the next read answers the error
                raise CorruptData(topic, partition, offset, q.corrupt_until(offset))
            view = self._log.view(pos, size) if size else None
            if view is None:
                if batches:
                    break
                if q.closed:  # the topic was deleted meanwhile (closed before its files go)
                    raise self._missing(topic, partition)
                raise OffsetOutOfRange(f"{topic}-{partition} offset {offset} was deleted by retention")
            if batches and total + size > max_bytes:
                break
            batches.append(view)
            total += size
            offset = _BASE.unpack_from(view, 0)[0] + _LAST_DELTA.unpack_from(view, 23)[0] + 1
        return ReadResult(batches, hw, q.log_start, stable)

    # ---- transactions (store/transactions.py) --------------------------------------------
    def append_control(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int = 0) -> AppendResult:
        """Append a transaction marker (COMMIT or ABORT) for the producer, as Kafka's leader
        writes it when the coordinator ends a transaction: it closes the producer's open
        transaction in the partition, and an ABORT enters it into the aborted index. Raises
        what `append` raises."""
        batch = end_transaction_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                       _time_ns() // 1_000_000)
        return self.append(topic, partition, batch, parse_header(batch))

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The offset below which no record belongs to an open transaction: the first offset
        of the oldest open one (not below the log start), or the high watermark if lower."""
        part = self._partition(topic, partition)
        hw = part.queue.high_watermark if part.hw is None else part.hw
        return hw if part.txns is None else part.txns.last_stable(part.queue.log_start, hw)

    def aborted_transactions(self, topic: str, partition: int, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a fetch of [start, end)
        overlaps (marker at or after `start`, first offset before `end`), by first offset."""
        txns = self._partition(topic, partition).txns
        return [] if txns is None else txns.collect(start, end)

    def open_transactions(self, topic: str, partition: int) -> dict[int, int]:
        """Producer id -> first offset of its open transaction in the partition (a copy)."""
        txns = self._partition(topic, partition).txns
        return {} if txns is None else txns.open.copy()

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset below which records are readable: the log end on a single node; on a
        replicated one, what the in-sync replicas hold (set_high_watermark)."""
        part = self._partition(topic, partition)
        return part.queue.high_watermark if part.hw is None else part.hw

    def log_end_offset(self, topic: str, partition: int) -> int:
        """The offset the next appended record gets."""
        return self._partition(topic, partition).queue.high_watermark

    def set_high_watermark(self, topic: str, partition: int, offset: int | None) -> int:
        """Replication moves the high watermark (None: follow the log end again); kept within
        [log start, log end] and never moved back. Returns it."""
        part = self._partition(topic, partition)
        q = part.queue
        with self._lock:
            if offset is None:
                part.hw = None
            else:
                offset = max(q.log_start, min(offset, q.high_watermark))
                part.hw = offset if part.hw is None else max(part.hw, offset)
            if part.txns is not None:
                part.txns.replicated(part.hw)
            return q.high_watermark if part.hw is None else part.hw

    def replicate(self, following: bool) -> None:
        """Take part in a broker group (broker/cluster/node.py): high watermarks from now on move
        only by `replicated_to`, and a follower (`following`) writes nothing of its own
        (retention and the log cleaner leave the commitlog to its master). Every partition whose
        log end is past its high watermark waits for the whole present log to be replicated."""
        with self._lock:
            if self._unreplicated is None:
                self._unreplicated = Unreplicated()
            self.following = following
            self._unreplicated.pending_from(self._all_partitions(), self._log.write_position)

    def replicated_to(self, position: int) -> None:
        """The in-sync replicas hold the commitlog below `position`: the high watermarks of the
        partitions written below it move to their entries' next offsets (store/replica.py),
        and fetches waiting on them are woken."""
        with self._lock:
            if self._unreplicated is None:
                return
            moved = self._unreplicated.advance(position)
            for part in moved:
                if part.txns is not None:
                    part.txns.replicated(part.hw)
        for part in moved:
            if not part.internal:
                for callback in self._subscribers:
                    callback(part.topic, part.index)

    @property
    def log_start_position(self) -> int:
        """The commitlog's first position (retention moves it)."""
        return self._log.min_position

    def master_epochs(self) -> list[tuple[int, int]]:
        """(master epoch, commitlog position it began at) of every epoch a master of this log
        started (begin_master_epoch), oldest first: where a returning follower's log and its
        master's part (broker/cluster/state.py's truncation_point)."""
        return sorted(decode_master_epoch(key, value) for key, value in self.state_items(MASTER_EPOCH))

    def begin_master_epoch(self, epoch: int) -> int:
        """This store becomes its group's master in `epoch`: a state record says where in the
        commitlog the epoch begins (replicated like every record, so each replica knows the
        epochs of the log it holds), and every partition is led in that epoch from its log end
        (Kafka's leader epoch). Made durable before returning; returns the start position."""
        with self._state_lock:  # nothing else appends: the node serves as master only after this
            start = self._log.write_position
            self._write_state_locked([encode_master_epoch(epoch, start)])
        with self._lock:
            self._default_epoch = epoch
            for part in self._all_partitions():
                if not part.internal:
                    part.epochs.assign(epoch, part.queue.high_watermark)
                    part.leader_epoch = max(part.leader_epoch, epoch)
        self._make_durable()
        return start

    # ---- leader epochs (store/epochs.py) ------------------------------------------------
    def leader_epoch(self, topic: str, partition: int) -> int:
        """The epoch this store leads the partition in (0 for one it does not have: a topic
        deleted while a Metadata answer was being built)."""
        part = self._find(topic, partition)
        return 0 if part is None else part.leader_epoch

    def become_leader(self, topic: str, partition: int, epoch: int) -> None:
        """This store appends to the partition as the leader of `epoch` from now on: the epoch
        starts at the log end (Kafka's Partition.makeLeader)."""
        part = self._partition(topic, partition)
        with self._lock:
            part.epochs.assign(epoch, part.queue.high_watermark)
            part.leader_epoch = max(part.leader_epoch, epoch)

    def end_offset_for_epoch(self, topic: str, partition: int, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= `epoch`, where it ended), (-1, -1) if
        unknown (EpochCache.end_offset_for)."""
        part = self._partition(topic, partition)
        return part.epochs.end_offset_for(epoch, part.queue.high_watermark)

    def epoch_entries(self, topic: str, partition: int) -> list[tuple[int, int]]:
        return list(self._partition(topic, partition).epochs.entries)

    def log_start_offset(self, topic: str, partition: int) -> int:
        return self._partition(topic, partition).queue.log_start

    def tag_hashes(self, topic: str, partition: int, start: int, stop: int) -> np.ndarray:
        """Tag hashes (int64) of offsets [start, stop); a view over the queue when possible."""
        return self._partition(topic, partition).queue.entries(start, stop)["tag"]

    def _time_index(self, part: Partition) -> TimeIndex:
        ti = part.time_index
        if ti is None or ti.covered < part.queue.log_start:
            ti = TimeIndex(part.queue.log_start)
            ti.extend(part.queue, self._log, part.queue.high_watermark)
            with self._lock:
                ti.extend(part.queue, self._log, part.queue.high_watermark)
                part.time_index = ti
        return ti

    def offset_for_timestamp(self, topic: str, partition: int, ts: int) -> tuple[int, int]:
        part = self._partition(topic, partition)
        return offset_for_timestamp(self._time_index(part), part.queue, self._log, ts)

    def max_timestamp_offset(self, topic: str, partition: int) -> tuple[int, int]:
        part = self._partition(topic, partition)
        return max_timestamp_offset(self._time_index(part), part.queue, self._log)

    # ---- key and message-id lookups --------------------------------------------------
    def lookup_key(self, topic: str, key: bytes, begin_ms: int, end_ms: int,
                   max_hits: int = 32, wait_s: float | None = None) -> list[StoredRecord]:
        """Records of `topic` with `key` stored in [begin_ms, end_ms], newest first. Keys are
        indexed off the write path: this waits up to `wait_s` (KEY_LOOKUP_WAIT_S) for the index
        to reach what was written before the call; `key_index_behind()` then says how far it
        still is."""
        meta = self._registry.get(topic)
        self._keys.wait_caught_up(KEY_LOOKUP_WAIT_S if wait_s is None else wait_s)
        hits: list[StoredRecord] = []
        for pos, delta in self._key_index.candidates(records.key_hash(topic, key), begin_ms, end_ms):
            rec = self._record_at(pos, delta)
            if rec is not None and rec.key == key and rec.topic == topic and \
                    self._entry_topic_id(pos) == meta.topic_id.bytes and self._is_live(rec, pos):
                hits.append(rec)
                if len(hits) >= max_hits:
                    break
        return hits

    def _is_live(self, rec: StoredRecord, batch_position: int) -> bool:
        """Does the record's queue entry point at this copy of it? Not when the log cleaner
        removed it (superseded) or moved it (the key index holds both copies)."""
        part = self._find(rec.topic, rec.partition)
        return part is not None and part.queue.entry(rec.offset)[0] == batch_position

    def key_index_behind(self) -> int:
        """Commitlog bytes written but not yet key-indexed (0 when caught up)."""
        return self._keys.behind()

    def _keys_indexed(self, topic: str, partition: int, topic_id: bytes) -> bool:
        """The dispatcher's question: are this entry's keys indexed (this incarnation of its topic)?"""
        part = self._find(topic, partition)
        return part is not None and part.key_indexed and part.topic_id == topic_id

    def _any_keys_indexed(self) -> bool:
        return bool(self._key_indexed_ids())

    def _key_indexed_ids(self) -> frozenset[bytes]:
        """The topic ids whose keys are indexed: the key worker's `_keys_indexed`."""
        return frozenset(meta.topic_id.bytes for meta in list(self._registry.topics.values())
                         if features(meta.configs)[1])

    def lookup_message_id(self, msg_id: str) -> StoredRecord | None:
        decoded = msgid.decode(msg_id)
        if decoded is None or decoded[0] != self.config.node_id:
            return None
        return self._record_at(decoded[1], decoded[2])

    def _entry_topic_id(self, batch_position: int) -> bytes | None:
        view = self._log.view(batch_position - ENTRY_AT_BATCH, ENTRY_HEADER.size)
        return None if view is None else ENTRY_HEADER.unpack_from(view)[5]

    def _record_at(self, batch_position: int, offset_delta: int) -> StoredRecord | None:
        """Decode one record by position; None if gone, dead (deleted topic) or not a record."""
        head = self._log.view(batch_position - ENTRY_AT_BATCH, ENTRY_HEADER.size)
        if head is None or len(head) < ENTRY_HEADER.size:
            return None
        length, head_crc, magic, _, tlen, topic_id, partition, base, _, _, _ = ENTRY_HEADER.unpack_from(head)
        if magic != MAGIC_DATA or offset_delta < 0:  # a relocated batch holds fewer records than it spans
            return None
        entry = self._log.view(batch_position - ENTRY_AT_BATCH, length)
        if entry is None or len(entry) < length or crc_of(entry, 0, length) != head_crc:
            return None  # gone, or damaged at rest: a lookup never decodes corrupt bytes
        topic = bytes(entry[length - tlen:]).decode()
        meta = self._registry.topics.get(topic)
        if meta is None or meta.topic_id.bytes != topic_id:
            return None
        part = self._find(topic, partition)
        if part is None or base + offset_delta < part.queue.log_start:
            return None
        batch = entry[ENTRY_AT_BATCH:length - tlen]
        if not self._committed(part, batch, base + offset_delta):
            return None
        for r in records.decode(batch):
            if r.offset == base + offset_delta:
                return StoredRecord(topic, partition, r.offset, r.timestamp, r.key, r.value,
                                    list(r.headers), msgid.encode(self.config.node_id, batch_position,
                                                                  offset_delta))
        return None

    def _committed(self, part: Partition, batch, offset: int) -> bool:
        """Is the record at `offset` of `batch` one a read_committed consumer may see? Lookups by key
        and by message id show only those: never a transaction marker, a record of an aborted
        transaction or of one still open (issue 19)."""
        attributes = batch[ATTRIBUTES_LOW]
        if not attributes & TXN_BITS:  # neither transactional nor a marker: the common case
            return True
        if attributes & CONTROL_BIT or offset >= self.last_stable_offset(part.topic, part.index):
            return False
        return not self.aborted_batch(part.topic, part.index, batch, offset, offset + 1)

    def aborted_batch(self, topic: str, partition: int, batch, start: int, stop: int) -> bool:
        """Is `batch` (its records in [start, stop)) a batch of an aborted transaction: transactional,
        and its producer's aborted range covers it?"""
        if not batch[ATTRIBUTES_LOW] & TRANSACTIONAL_BIT:
            return False
        pid = _PRODUCER_ID.unpack_from(batch, 43)[0]
        return any(p == pid for p, _ in self.aborted_transactions(topic, partition, start, stop))

    def message_id(self, topic: str, partition: int, offset: int) -> str:
        """The message id of a stored record."""
        q = self._partition(topic, partition).queue
        if not q.log_start <= offset < q.high_watermark:
            raise OffsetOutOfRange(f"{topic}-{partition} offset {offset}")
        pos, size = q.entry(offset)
        if size == CORRUPT:
            raise CorruptData(topic, partition, offset, q.corrupt_until(offset))
        view = self._log.view(pos, size)
        if view is None:
            raise OffsetOutOfRange(f"{topic}-{partition} offset {offset}")
        return msgid.encode(self.config.node_id, pos, offset - _BASE.unpack_from(view, 0)[0])


def _first_offset_within_bytes(q: ConsumeQueue, start: int, limit: int) -> int:
    """The smallest batch base offset >= start from which the partition's batches up to the
    high watermark take at most `limit` bytes (every record's entry repeats its batch's
    position and size: one per batch is counted)."""
    hw = q.high_watermark
    if hw <= start:
        return start
    entries = q.entries(start, hw)
    pos, size = entries["pos"], entries["size"]
    first = np.ones(len(pos), dtype=bool)  # the first entry of each batch
    first[1:] = pos[1:] != pos[:-1]
    batch_offsets = np.flatnonzero(first)
    sizes = np.maximum(size[batch_offsets], 0).astype(np.int64)
    kept_from = np.cumsum(sizes[::-1])[::-1]  # bytes from each batch to the end
    fits = np.flatnonzero(kept_from <= limit)
    return start + int(batch_offsets[fits[0]]) if len(fits) else hw


def deletes(configs: dict[str, str]) -> bool:
    """Does the topic's cleanup.policy include `delete` (the default)?"""
    return cleanup_policy(configs)[1]

