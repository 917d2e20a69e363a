"""The Store facade: lifecycle, topics, appends, reads (RocketMQ's DefaultMessageStore; Kafka's UnifiedLog).

Owns wiring the parts together, opening (recovery, migration) and closing, the state records'
write path, topic changes, the append lock (one writer at a time), reads, leader epochs, and
the background threads' lifecycle (allocator, flusher, retention, checkpointer, log cleaner,
key dispatcher). Never does network I/O and never imports the broker; every call is plain
blocking Python the broker may run off its event loop.

The rest of Store's methods live in mixins it inherits, over the same attributes (set here, in
__init__); none of them imports this module:

* store/follower.py (FollowerLog): what a leader ships and a follower applies, starting over
  from the master's copy, truncation, high watermarks in a broker group, master epochs;
* store/housekeeping.py (Housekeeping): checkpoints, retention, the log cleaner's entry points,
  DeleteRecords;
* store/lookups.py (Lookups): lookups by key, message id and timestamp, tag hashes;
* store/log_transactions.py (LogTransactions): transaction markers, the last stable offset,
  aborted and open transactions.

The data directory's own files (its lock, the start-over marker) are store/data_dir.py's, and
what appends and reads return is store/results.py's.
"""

from __future__ import annotations

import errno
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

from protocol.record_batch import BatchHeader, parse_header
from store import legacy, recovery
from store.atomic_file import fsync_dir
from store.checkpoint import Checkpoint, mark_clean, queue_key, take_clean_mark
from store.commitlog import CommitLog
from store.compaction import Cleaner
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
    CONTROL_BIT,
    TXN_BITS,
    KeyDispatcher,
    reserve_marker,
    tags_of,
    to_queue,
    to_transactions,
)
from store.errors import (
    AdminBusy,
    CorruptData,
    CorruptEntry,
    LogDirOffline,
    OffsetOutOfRange,
    QueueFilesUnavailable,
    StorageFull,
    StoreError,
    UnknownPartition,
    UnknownTopic,
)
from store.flush import Flusher
from store.follower import FollowerLog
from store.housekeeping import Housekeeping
from store.key_index import KeyIndex
from store.log_transactions import LogTransactions
from store.lookups import Lookups
from store.offsets import OffsetStore
from store.partition import Partition, queue_dir
from store.periodic import Periodic
from store.piped import PipedBatch
from store.replica import Unreplicated
from store.reserver import QueueReserver
from store.results import AppendResult, ReadResult
from store.state import (
    STATE_CHUNK,
    STATE_TOPIC,
    Record,
    StateView,
    encode_batch,
    encode_topic,
    offset_key,
    topic_key,
)
from store.topics import TopicMeta, TopicRegistry

__all__ = ["AppendResult", "ReadResult", "Store"]  # the results are store/results.py's, re-exported

log = logging.getLogger(__name__)
_BASE_AND_LAST_DELTA = struct.Struct(">q15xi")  # a batch's baseOffset (at 0) and lastOffsetDelta (at 23)
FULL_WARNING_INTERVAL_S = 10.0  # one "out of disk space" line per this many seconds

# The append path builds its result with tuple.__new__, a C call: the NamedTuple's own
# __new__ is a Python function, about 0.25 us of a 3 us append.
_new_tuple = tuple.__new__
_first_and_last = _BASE_AND_LAST_DELTA.unpack_from
_time_ns = time.time_ns


class Store(FollowerLog, Housekeeping, Lookups, LogTransactions):
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
        self._subscribers: list[Callable[[list[tuple[str, int]]], None]] = []
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
        commitlog = CommitLog(root / "commitlog", config.segment_bytes, prezero=config.flush_mode == "sync")
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

    # ---- state records (store/state.py) ----------------------------------------------
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

    @property
    def group_config_changes(self) -> int:
        """Moves whenever a group config record is applied (written here, or replicated)."""
        return self._view.group_config_changes

    @property
    def broker_config_changes(self) -> int:
        """Moves whenever a dynamic broker setting's record is applied (written here, or replicated)."""
        return self._view.broker_config_changes

    def state_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        """The live state records whose key starts with `prefix` (SCRAM credentials, say)."""
        return [(key, value) for key, (_, value) in list(self._view.live.items()) if key.startswith(prefix)]

    def _make_durable(self) -> None:
        self._flusher.flush_now()
        if self.offline is not None:
            raise self.offline

    # ---- closing, going offline, flushing --------------------------------------------
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

    def wait_for_preallocation(self, timeout: float = 60.0) -> bool:
        """Block until the allocator has the next commitlog segment ready."""
        return self._log.wait_ahead(timeout)

    def flush(self) -> None:
        """Make everything appended so far durable (blocking)."""
        self._flusher.flush_now()

    def group_commit_stats(self) -> tuple[int, int]:
        """(group commits so far, appends they made durable); sync mode only, else (0, 0)."""
        return self._flusher.commits, self._flusher.committed_appends

    # ---- topics ----------------------------------------------------------------------
    def topics(self) -> dict[str, TopicMeta]:
        return dict(self._registry.topics)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, None for an id no topic has."""
        return self._registry.names_by_id.get(topic_id)

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
        """Remove a topic, and every group's committed offsets on it, in one state batch (Kafka's
        group coordinator deletes them with the partitions: a new topic of the same name starts
        with none); its files go outside the append lock, and before any topic of the same name
        can be created again."""
        with self._admin_lock:
            self._registry.get(name)  # UnknownTopic if there is none
            committed = [(offset_key(group, topic, partition), None) for group in self.offsets.groups()
                         for topic, partition in self.offsets.fetch_group(group) if topic == name]
            self.write_state([(topic_key(name), None), *committed])  # the registry forgets it
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
            # again, now that every queue made has given its files back: out of open files, the first
            # rmtree (which opens each directory) could fail while the others still held theirs
            for made_p in [*made, p]:
                shutil.rmtree(queue_dir(qroot, name, made_p), ignore_errors=True)
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

    def subscribe_appends(self, callback: Callable[[list[tuple[str, int]]], None]) -> None:
        """`callback([(topic, partition), ...])` when readers may see more of those partitions: after an
        append call (one call for all its partitions), or (in a broker group) when their high watermark
        moves (replicated_to); called on the thread that appended or called replicated_to."""
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
        it (UnknownTopic/UnknownPartition, StorageFull, EntryTooLarge, BatchCrcMismatch of a
        PipedBatch, or an I/O error, which also fails the items after it and those deferred with
        it that it did not write); a refused item wrote nothing and did not stop the others.
        One lock, clock and call per request saves about 0.5 us of a 3 us append. Partitions
        are looked up under the lock, so a concurrent delete_topic (which unlists them under
        it) is seen; tag and key parsing, for the topics that ask for it, also happens under it.

        The entries are written together (CommitLog.append's `defer`: one pwrite() per request;
        at 100 partitions of 1 KiB the event loop's time per request fell from about 1,040 to
        760 us), then derived into their queues: no reader sees an entry before its bytes."""
        out: list = []
        written: list = []  # per entry deferred: (its index in out, partition, base offset, position, batch, tags, header)
        parts_of = self._parts.get
        log = self._log
        log_append = log.append
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
            ends: dict[ConsumeQueue, int] = {}  # each queue's end after the entries of this request so far
            failed: StoreError | None = None
            raised: BaseException | None = None
            try:
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
                    if batch.__class__ is PipedBatch and (part.tag_header is not None or header.attributes & TXN_BITS):
                        batch = batch.materialize()  # these read the records: they take the bytes out of the pipe
                    tags = tags_of(part, batch)
                    count = header.record_count
                    base = ends.get(q)
                    if base is None:
                        base = q.high_watermark
                    try:
                        # every page written below must have disk blocks first: a full disk is
                        # StorageFull here, before any byte is written, never SIGBUS on an mmap store
                        if base + count > q.refill_at:
                            self._reserve(q, base, count)
                        if header.attributes & CONTROL_BIT:
                            reserve_marker(part)
                        pos = log_append(batch, part.topic_id, part.topic_bytes, partition, base, count, now,
                                         header.max_timestamp, part.leader_epoch, part.internal, 0, True)
                    except StoreError as exc:  # StorageFull, EntryTooLarge: nothing written
                        if exc.__class__ is StorageFull:
                            self._warn_full(exc)
                        out.append(exc)
                        continue
                    except OSError as exc:  # it and the entries deferred before it may be lost
                        failed = self._write_failed(exc)
                        break
                    ends[q] = base + count
                    written.append((len(out), part, base, pos, batch, tags, header))
                    out.append(None)
                if failed is None:
                    log.write_deferred()
            except OSError as exc:
                failed = self._write_failed(exc)
            except BaseException as exc:  # noqa: BLE001 (re-raised below) e.g. records that do not parse
                log.discard()  # what is still deferred is dropped; what a roll wrote first is derived below
                raised = exc
            if failed is not None:  # an I/O error: the items not written or not tried get it
                out.extend([failed] * (len(items) - len(out)))
            at_most = log.write_position
            for at, part, base, pos, batch, tags, header in written:
                size = len(batch)
                end = pos + size + len(part.topic_bytes)
                if end > at_most:  # deferred, and lost with a failed write
                    out[at] = failed
                    continue
                count = header.record_count
                to_queue(part, base, count, pos, size, tags, header.max_timestamp)
                if header.attributes & TXN_BITS:  # transactions: the one test ordinary batches pay
                    to_transactions(part, batch, base)
                if unreplicated is not None:
                    unreplicated.add(end, part, base + count)
                # tuple.__new__, a C call: the NamedTuple's own __new__ is a Python function
                out[at] = _new_tuple(AppendResult, (base, base + count - 1, now, end, handle, part.queue.log_start))
                appended += 1
            if handle is not None and appended:
                self._flusher.claim(appended)
        if raised is not None:
            raise raised
        if self._subscribers and appended:
            keys = [(topic, partition) for (topic, partition, _, _), result in zip(items, out)
                    if result.__class__ is AppendResult and topic != STATE_TOPIC]  # internal: nobody waits on it
            for callback in self._subscribers:
                callback(keys)
        return out

    def _write_failed(self, exc: OSError) -> StoreError:
        """The error for an append's failed commitlog write; call under the append lock. A full
        disk is StorageFull (and warned about); any other I/O error takes the log directory
        offline. (A follower's spliced bytes have their own: splice_write_error.)"""
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

    # ---- reads -----------------------------------------------------------------------
    def read(self, topic: str, partition: int, offset: int, max_bytes: int,
             committed: bool = False, whole_log: bool = False) -> ReadResult:
        """Batches from `offset` below the high watermark (never beyond it: what the replicas
        may not have yet stays unread); with `committed` (read_committed), below the last
        stable offset instead, so no batch of an open transaction is returned. With
        `whole_log`, up to the log end: for state derived from every batch this log holds (a
        new master's producer state, as Kafka's leader loads it from its whole log)."""
        parts = self._parts.get(topic)  # _partition(), inlined: once per partition of every fetch
        if parts is None or not 0 <= partition < len(parts):
            raise self._missing(topic, partition)
        part = parts[partition]
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
        entry = q.entry
        log_view = self._log.view
        while offset < limit:
            pos, size = entry(offset)
            if size == 0:  # a gap the log cleaner left (this topic is or was compacted): the next record follows
                if q.closed:  # the topic was deleted meanwhile (closed before its files go)
                    raise self._missing(topic, partition)
                offset = q.next_live(offset, limit)
                continue
            if size == CORRUPT:
                if batches:
                    break  # the next read answers the error
                raise CorruptData(topic, partition, offset, q.corrupt_until(offset))
            view = log_view(pos, size) if size else None
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
            base, last_delta = _first_and_last(view)
            offset = base + last_delta + 1
        return _new_tuple(ReadResult, (batches, hw, q.log_start, stable))

    def at_end(self, topic: str, partition: int, offset: int) -> tuple[int, int, int] | None:
        """(high watermark, last stable offset, log start offset) when `offset` is the high
        watermark, where a read returns nothing (a consumer that has caught up: most partitions
        of a wide fetch); None otherwise, or for a partition this store does not have."""
        part = self._find(topic, partition)
        if part is None:
            return None
        q = part.queue
        hw = q.high_watermark if part.hw is None else part.hw
        if offset != hw:
            return None
        txns = part.txns
        return hw, hw if txns is None else txns.last_stable(q.log_start, hw), q.log_start

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset below which records are readable: the log end on a single node; on a
        replicated one, what the in-sync replicas hold (set_high_watermark)."""
        part = self._partition(topic, partition)
        return part.queue.high_watermark if part.hw is None else part.hw

    def log_end_offset(self, topic: str, partition: int) -> int:
        """The offset the next appended record gets."""
        return self._partition(topic, partition).queue.high_watermark

    # ---- leader epochs (store/epochs.py) ---------------------------------------------
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
