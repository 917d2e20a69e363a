"""Checkpoints, retention, log cleaning, DeleteRecords (RocketMQ's CleanCommitLogService; Kafka's LogManager).

A mixin of Store (store/store.py), over the attributes Store.__init__ sets; it holds no state of
its own and imports nothing of store/store.py. It owns:

* write_checkpoint: the derived files made durable up to a point, and the point saved
  (store/checkpoint.py; the checkpointer thread calls it);
* retention (enforce_retention, the retention thread's call): whole expired commitlog
  segments go, after the live state records and compacted batches in them are carried
  forward (_carry_state, the cleaner's carry), and each topic's own retention.ms and
  retention.bytes move its partitions' log starts (store/retention.py decides the segments);
* the log cleaner's entry points (clean, _compacted_partitions, _append_relocated; the
  cleaner itself is store/compaction.py);
* delete_records (Kafka's DeleteRecords).

RocketMQ's counterparts: CleanCommitLogService (expired commitlog files), the flush services
and StoreCheckpoint; Kafka's: LogManager's retention and its recovery-point checkpoints.
"""

from __future__ import annotations

import bisect
import logging
import time

import numpy as np

from protocol.record_batch import parse_header
from store import recovery, retention
from store.checkpoint import Checkpoint, queue_key
from store.compaction import CleanStats, Policy
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.entry import RELOCATED
from store.errors import OffsetOutOfRange, StorageFull
from store.partition import Partition, cleanup_policy, irregular
from store.segment import sync_filesystem
from store.state import STATE_CHUNK, STATE_TOPIC

log = logging.getLogger(__name__)
# A checkpoint with at least this many moved queues syncs the data directory's file system once
# (store/segment.py: sync_filesystem) instead of msyncing each queue's mapping: with 10,000
# partitions each moved queue cost a syscall and a flush of its own every checkpoint
SYNCFS_FROM_QUEUES = 64
_time_ns = time.time_ns


class Housekeeping:
    # ---- checkpoints (store/checkpoint.py) -------------------------------------------
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

    # ---- settings that change while the store runs (the broker's dynamic configs) ----------
    RECONFIGURABLE = ("retention_ms", "retention_bytes", "cleaner_backoff_ms", "cleaner_min_cleanable_ratio",
                      "cleaner_delete_retention_ms", "cleaner_min_compaction_lag_ms", "cleaner_max_compaction_lag_ms")

    def reconfigure(self, config: StoreConfig) -> None:
        """Take `config`'s retention and log-cleaner settings (RECONFIGURABLE): the next retention
        pass and clean use them, the cleaner's sleep after the one under way."""
        for name in self.RECONFIGURABLE:
            setattr(self.config, name, getattr(config, name))
        self._cleaning.interval_s = config.cleaner_backoff_ms / 1000

    # ---- retention (store/retention.py) ----------------------------------------------
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

    # ---- log compaction (store/compaction.py) ----------------------------------------
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

    # ---- DeleteRecords ---------------------------------------------------------------
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
