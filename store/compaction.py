"""The log cleaner: Kafka's cleanup.policy=compact in the MetaQ model (docs/storage.md,
*Log compaction*).

A consume queue is a table of pointers, so compacting a partition never rewrites a segment:

* **Cleaning** (a thread, `log.cleaner.backoff.ms` apart). For a partition whose dirty part
  (the records after its cleaner point) is a large enough share of its records, one pass
  reads the keys of the dirty records into a map (key -> latest offset), then walks every
  batch below the dirty end. A batch none of whose records is superseded is left alone; a
  batch whose records all are (or are expired tombstones) loses its queue entries (gaps,
  as Kafka's compaction leaves them); a batch with some left is re-encoded with those
  (protocol/rebatch.py: baseOffset and lastOffsetDelta kept, so offsets do not change) and
  appended at the commitlog head as a *relocated* entry (entry flag RELOCATED), which then
  takes over the offsets it keeps. The partition's last batch is never cleaned (Kafka never
  cleans the active segment), so the latest record of the log always stays where it is.
* **Carrying** (retention's step). Before retention deletes commitlog segments, the live
  batches of compact-only topics in them are appended again as relocated entries, so the
  latest value of every key outlives any segment. A segment holding nothing but dead bytes
  and, below `log.cleaner.min.cleanable.ratio`, live compacted batches may go before its
  time (`deletable_prefix`): that is how a compacted topic's disk space comes back.

Transactions (store/transactions.py): transaction markers (control batches) are always kept,
and records of aborted transactions are not removed for being aborted (Kafka's cleaner removes
both once safe); but an aborted record never supersedes another (it stays out of the key map),
a marker's record is no keyed record, and nothing from the partition's last stable offset on is
cleaned (Kafka's first unstable offset).

Relocated entries are ordinary commitlog entries: recovery and a follower derive them with
the same step as this cleaner (store/dispatch.py's `relocate`), so the compacted state
survives a crash and replicates with the commitlog. Relocated bytes are made durable before
any queue entry points at them. Which batches were dropped whole is not logged: after a
full rebuild from the commitlog such records reappear (superseded, never wrong) until the
next clean. Per-record Python work runs on this thread in turns (at most BUSY_SHARE of the
time), never on the append path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from protocol.rebatch import rebuilt
from protocol.record_batch import CONTROL_BIT, HEADER, TRANSACTIONAL_BIT
from store import records
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.dispatch import relocate, tags_of
from store.errors import StorageFull, StoreError
from store.partition import Partition

log = logging.getLogger(__name__)
MAX_KEYS = 500_000  # keys in one pass's map (Kafka's log.cleaner.dedupe.buffer.size); more: the next pass goes on
BUSY_SHARE = 0.5  # of the cleaner thread's time; the event loop needs the GIL for the rest
TURN_S = 0.002
NO_LAG = 2**63 - 1
CARRY_CHUNK = 32 << 20  # bytes of batches carried per flush (held in memory meanwhile)


@dataclass(frozen=True, slots=True)
class Policy:
    """A compacted topic's cleaner settings: its configs, else the broker's log.cleaner.* ones."""

    dirty_ratio: float  # min.cleanable.dirty.ratio
    delete_retention_ms: int  # delete.retention.ms: how long a tombstone outlives its cleaning
    min_lag_ms: int  # min.compaction.lag.ms: records younger than this stay as they are
    max_lag_ms: int  # max.compaction.lag.ms: a dirty record older than this forces a clean

    @classmethod
    def of(cls, configs: dict[str, str], cfg: StoreConfig) -> Policy:
        return cls(float(configs.get("min.cleanable.dirty.ratio", cfg.cleaner_min_cleanable_ratio)),
                   int(configs.get("delete.retention.ms", cfg.cleaner_delete_retention_ms)),
                   int(configs.get("min.compaction.lag.ms", cfg.cleaner_min_compaction_lag_ms)),
                   int(configs.get("max.compaction.lag.ms", cfg.cleaner_max_compaction_lag_ms)))


@dataclass
class CleanStats:
    partitions: int = 0
    batches_read: int = 0
    bytes_read: int = 0
    records_read: int = 0
    records_removed: int = 0
    batches_relocated: int = 0
    bytes_relocated: int = 0
    seconds: float = 0.0
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)  # cleaner point reached


class Stopped(Exception):
    """The store is closing: the pass ends where it is (nothing half done stays visible)."""


class Batch(NamedTuple):
    position: int
    size: int
    view: memoryview
    base: int
    stop: int  # baseOffset + lastOffsetDelta + 1
    max_ts: int
    control: bool
    transactional: bool
    producer_id: int


def batches(q: ConsumeQueue, commitlog, start: int, stop: int) -> Iterator[Batch]:
    """The batches holding the live offsets in [start, stop), in offset order, each once
    (a compacted queue's gaps skipped; corrupt and vanished entries stepped over)."""
    offset = start
    while offset < stop:
        offset = q.next_live(offset, stop)
        if offset >= stop:
            return
        pos, size = q.entry(offset)
        view = commitlog.view(pos, size) if size > 0 else None
        if view is None:
            offset += 1
            continue
        fields = HEADER.unpack_from(view)
        base, last = fields[0], fields[0] + fields[6]
        yield Batch(pos, size, view, base, last + 1, fields[8], bool(fields[5] & CONTROL_BIT),
                    bool(fields[5] & TRANSACTIONAL_BIT), fields[9])
        offset = max(offset + 1, last + 1)


def _pointing(q: ConsumeQueue, b: Batch) -> np.ndarray:
    """The offsets of the batch's span whose entries point at it (its live records)."""
    entries = q.entries(b.base, b.stop)
    return np.flatnonzero(entries["pos"] == b.position) + b.base


class Cleaner:
    """Cleans compacted partitions and carries their live batches before retention; `lock`
    makes the two take turns. Works through the store's narrow relocation interface:
    `_append_relocated`, `_make_durable`, `_lock`, `_log`, `_compacted_partitions`."""

    def __init__(self, store) -> None:
        self._store = store
        self.lock = threading.Lock()
        self._turn = time.monotonic()
        self.totals = CleanStats()
        self._stopping = False

    def stop(self) -> None:
        """Make a clean in progress end at its next turn (the store is closing)."""
        self._stopping = True

    def _breathe(self) -> None:
        """Yield the GIL: after TURN_S of work, sleep so the thread is busy BUSY_SHARE of the time."""
        if self._stopping:
            raise Stopped("the store is closing")
        now = time.monotonic()
        busy = now - self._turn
        if busy >= TURN_S:
            time.sleep(min(busy, 2 * TURN_S) * (1 - BUSY_SHARE) / BUSY_SHARE)
            self._turn = time.monotonic()

    def _begin(self) -> None:
        """A run starts: its first turn is measured from now (not from the last run's end)."""
        self._turn = time.monotonic()

    # ---- cleaning --------------------------------------------------------------------
    def run(self, now_ms: int, force: bool = False) -> CleanStats:
        """Clean every compacted partition that is due (all of them with `force`)."""
        stats = CleanStats()
        began = time.monotonic()
        with self.lock:
            self._begin()
            for part, policy in self._store._compacted_partitions():
                if part.queue.closed or not (force or self.due(part, policy, now_ms)):
                    continue
                try:
                    self.clean(part, policy, now_ms, stats)
                except StorageFull as exc:
                    log.warning("the log cleaner stopped: %s", exc)
                    break
                except Stopped:
                    break
                except StoreError as exc:  # offline, or the topic went meanwhile
                    log.warning("the log cleaner skipped %s-%d: %s", part.topic, part.index, exc)
        stats.seconds = time.monotonic() - began
        if stats.partitions:
            self._add(stats)
            log.info("log cleaner: %d partition(s), %d records read, %d removed, %d batches relocated "
                     "(%d bytes) in %.2f s", stats.partitions, stats.records_read, stats.records_removed,
                     stats.batches_relocated, stats.bytes_relocated, stats.seconds)
        return stats

    def _add(self, stats: CleanStats) -> None:
        t = self.totals
        for name in ("partitions", "batches_read", "bytes_read", "records_read", "records_removed",
                     "batches_relocated", "bytes_relocated", "seconds"):
            setattr(t, name, getattr(t, name) + getattr(stats, name))

    def due(self, part: Partition, policy: Policy, now_ms: int) -> bool:
        """Kafka's choice: the dirty records' share of the live ones reaches the topic's
        min.cleanable.dirty.ratio, or the oldest dirty record is older than max.compaction.lag.ms."""
        q = part.queue
        start, hw = q.log_start, q.high_watermark
        if part.tombstone_ts is not None and part.tombstone_ts < now_ms - policy.delete_retention_ms:
            return True  # a tombstone is due to go (Kafka: KIP-534)
        dirty_from = max(part.cleaned_to, start)
        dirty = q.count_live(dirty_from, hw)
        if dirty <= 1:
            return False
        if dirty >= policy.dirty_ratio * q.count_live(start, hw):
            return True
        if policy.max_lag_ms < NO_LAG:
            first = next(batches(q, self._store._log, dirty_from, hw), None)
            return first is not None and first.max_ts < now_ms - policy.max_lag_ms
        return False

    def clean(self, part: Partition, policy: Policy, now_ms: int, stats: CleanStats) -> None:
        """One pass over one partition (see the module docstring)."""
        store, q, commitlog = self._store, part.queue, self._store._log
        start, hw = q.log_start, q.high_watermark
        if hw - start < 2:
            return
        last = next(batches(q, commitlog, q.next_live(hw - 1, hw), hw), None)
        end = hw if last is None else last.base  # the last batch is never cleaned
        txns = part.txns
        if txns is not None:  # nor an open transaction's records, nor any after them (Kafka's first unstable offset)
            end = min(end, txns.last_stable(start, hw))
        dirty_from = max(part.cleaned_to, start)
        keymap: dict[bytes, int] = {}
        clean_end = dirty_from
        for b in batches(q, commitlog, dirty_from, end):
            if b.max_ts > now_ms - policy.min_lag_ms:
                break
            self._breathe()
            # a marker's record is no data record, and an aborted transaction's records supersede nothing
            if not b.control and not (b.transactional and txns is not None and txns.is_aborted(b.producer_id, b.base)):
                live = set(_pointing(q, b).tolist())
                for i, r in enumerate(records.cleaner_records(b.view)[1]):
                    if r.key is not None and r.offset in live:
                        keymap[r.key] = r.offset
                    if not i & 255:
                        self._breathe()
            clean_end = b.stop
            if len(keymap) >= MAX_KEYS:
                break
        horizon = now_ms - policy.delete_retention_ms
        if clean_end <= dirty_from and not (part.tombstone_ts is not None and part.tombstone_ts < horizon):
            return  # nothing dirty, and no tombstone due to go
        stats.partitions += 1
        tombstone_ts = None  # the oldest tombstone kept by this pass
        drops: list[tuple[int, np.ndarray]] = []
        moves: list[tuple[Partition, bytearray]] = []
        for b in batches(q, commitlog, start, clean_end):
            self._breathe()
            stats.batches_read += 1
            stats.bytes_read += b.size
            if b.control:  # transaction markers are always kept (Kafka removes them once safe)
                continue
            live = _pointing(q, b)
            alive = set(live.tolist())
            area, recs = records.cleaner_records(b.view)
            kept = []
            for i, r in enumerate(recs):
                if not i & 255:
                    self._breathe()
                if r.offset not in alive:
                    continue
                stats.records_read += 1
                if r.key is None or keymap.get(r.key, -1) > r.offset or \
                        (r.tombstone and r.offset < part.cleaned_to and b.max_ts < horizon):
                    stats.records_removed += 1
                    continue
                if r.tombstone:
                    tombstone_ts = b.max_ts if tombstone_ts is None else min(tombstone_ts, b.max_ts)
                kept.append(r)
            if len(kept) == len(alive):
                continue
            if not kept:
                drops.append((b.position, live))
            else:
                moves.append((part, rebuilt(b.view, [area[r.start:r.end] for r in kept])))
        failure = self._relocate(moves, stats)
        if failure is not None:
            raise failure  # the batches placed are in place; the cleaner point stays
        for position, offsets in drops:  # one short hold of the append lock each: appends go on between
            with store._lock:
                q.repoint(offsets, position, 0, 0)
                part.relocated = True
        part.time_index = None
        q.flush()  # the removed entries reach the disk before a checkpoint records the cleaner point
        part.cleaned_to = max(part.cleaned_to, clean_end)
        part.tombstone_ts = tombstone_ts
        stats.per_partition[(part.topic, part.index)] = clean_end

    def _relocate(self, moves: list[tuple[Partition, bytearray]], stats: CleanStats) -> StoreError | None:
        """Append re-encoded batches as relocated entries, make them durable with one flush,
        then let them take over their offsets. Stops at the first refusal and returns it
        (the ones appended before it are in place; stats count them). The records' offsets
        and tag hashes are read before the append lock is taken: under it, only numpy
        assignments run, so appends wait microseconds for it."""
        store = self._store
        placed = []
        failure = None
        for part, batch in moves:
            kept, tags = records.record_offsets(batch), tags_of(part, batch)
            try:
                placed.append((part, kept, tags, *store._append_relocated(part, batch)))
            except StoreError as exc:
                failure = exc
                break
        if placed:
            store._make_durable()  # no entry may point at bytes a crash could lose
            for part, kept, tags, position, size in placed:
                view = store._log.view(position, size)
                with store._lock:
                    if not part.queue.closed:  # the topic was deleted meanwhile: its files are gone
                        relocate(part, view, position, size, kept, tags)
            stats.batches_relocated += len(placed)
            stats.bytes_relocated += sum(size for *_, size in placed)
        return failure

    # ---- carrying (before retention deletes segments) -----------------------------------
    def carry(self, boundary: int) -> int:
        """Relocate the live batches of compact-only partitions stored below commitlog
        `boundary`, oldest first, and make their queues durable. Returns the position below
        which segments may go: `boundary`, or where the first batch not carried lies when the
        disk filled up."""
        stats = CleanStats()
        with self.lock:
            self._begin()
            todo = self._below(boundary)
            touched: set[Partition] = set()
            moves: list[tuple[Partition, bytearray]] = []
            origins: list[int] = []  # the commitlog position each move comes from
            held = 0
            for i, (position, offset, part) in enumerate(todo):
                batch = self._carried(part, position, offset)
                if batch is not None:
                    moves.append((part, batch))
                    origins.append(position)
                    held += len(batch)
                self._breathe()
                if moves and (held >= CARRY_CHUNK or i == len(todo) - 1):
                    before = stats.batches_relocated
                    failure = self._relocate(moves, stats)
                    placed = stats.batches_relocated - before
                    touched.update(p for p, _ in moves[:placed])
                    if failure is not None:
                        if not isinstance(failure, StorageFull):
                            raise failure
                        log.warning("carrying compacted records stopped: %s", failure)
                        boundary = origins[placed]  # segments wholly before it may still go
                        break
                    moves, origins, held = [], [], 0
            for part in touched:
                part.queue.flush()  # the moved entries are durable before their old segment goes
        if stats.batches_relocated:
            self._add(stats)
            log.info("carried %d live batches of compacted topics (%d bytes) forward before deleting "
                     "commitlog segments", stats.batches_relocated, stats.bytes_relocated)
        return boundary

    def _below(self, boundary: int) -> list[tuple[int, int, Partition]]:
        """(position, one of its offsets, partition) of every live batch of a compact-only
        partition below commitlog `boundary`, by position."""
        todo = []
        for part, _ in self._store._compacted_partitions():
            if part.deletes:  # compact,delete: retention expires these records instead
                continue
            q = part.queue
            offsets, positions, sizes = q.live(q.log_start, q.high_watermark)
            below = (positions < boundary) & (sizes > 0)
            unique, first = np.unique(positions[below], return_index=True)
            todo.extend((int(p), int(o), part) for p, o in zip(unique, offsets[below][first]))
        todo.sort(key=lambda item: item[0])
        return todo

    def _carried(self, part: Partition, position: int, offset: int) -> bytearray | None:
        """The batch at `position` as it is carried: whole, or with only its live records."""
        q = part.queue
        b = next(batches(q, self._store._log, offset, offset + 1), None)
        if b is None or b.position != position:
            return None
        alive = set(_pointing(q, b).tolist())
        area, recs = records.cleaner_records(b.view)
        kept = [r for r in recs if r.offset in alive]
        if len(kept) == len(recs):
            return bytearray(b.view)
        return rebuilt(b.view, [area[r.start:r.end] for r in kept])

    def deletable_prefix(self, segments, active, delete_floor: int, ratio: float) -> int:
        """How many of the oldest segments hold no live record of a topic with `delete` in
        its cleanup.policy (everything of those lies at or above `delete_floor`) and live
        batches of compact-only topics of at most (1 - ratio) of their size: retention may
        delete them after carrying those batches."""
        starts = np.array([seg.start for seg in segments], dtype=np.int64)
        live = np.zeros(len(segments), dtype=np.int64)
        for part, _ in self._store._compacted_partitions():
            if part.deletes:
                continue
            q = part.queue
            _, positions, sizes = q.live(q.log_start, q.high_watermark)
            if not len(positions):
                continue
            first = np.ones(len(positions), dtype=bool)
            first[1:] = positions[1:] != positions[:-1]
            pos, size = positions[first], np.maximum(sizes[first], 0)
            which = np.searchsorted(starts, pos, side="right") - 1
            np.add.at(live, which[which >= 0], size[which >= 0])
        count = 0
        for i, seg in enumerate(segments):
            if seg is active or seg.end > delete_floor or live[i] > seg.size * (1 - ratio):
                break
            count += 1
        return count
