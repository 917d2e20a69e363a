"""Opening derived state: trust it after a clean shutdown, else rebuild it from the commitlog.

Owns validating consume queues and key-index files against the checkpoint and the commitlog
end, verifying the commitlog's CRCs after a clean shutdown, and the full rebuild (scan +
torn-tail truncation, then re-deriving every queue and the key index). Offsets whose bytes
are damaged are marked corrupt in their queue and logged with topic, partition and offset
range. Never trusts a queue that is missing, mis-sized or points past the commitlog end, and
never deletes damaged bytes that valid entries follow.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from store.checkpoint import Checkpoint, queue_key
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.dispatch import (
    ATTRIBUTES_LOW,
    CONTROL_BIT,
    TXN_BITS,
    note_epoch,
    rederive_transactions,
    relocate,
    reserve_marker,
    tags_of,
    to_queue,
    to_transactions,
    transactions_of,
)
from store.entry import RELOCATED, EntryHeader
from store.epochs import EpochCache
from store.errors import CorruptEntry
from store.key_index import KeyIndex
from store.partition import Partition, irregular, queue_dir
from store.segment_walk import CorruptRegion
from store.state import STATE_META, STATE_TOPIC_ID, StateView
from store.topics import TopicMeta, TopicRegistry
from store.transactions import ABORTED_INDEX, Transactions

log = logging.getLogger(__name__)

Partitions = dict[tuple[str, int], Partition]


def metas(registry: TopicRegistry) -> list[TopicMeta]:
    """Every topic whose queues recovery derives: the state topic, then the registry's."""
    return [STATE_META, *registry.topics.values()]


def read_state(root: Path, config: StoreConfig, commitlog: CommitLog, ckpt: Checkpoint | None,
               view: StateView, tail: bool) -> int:
    """First pass: the state records (store/state.py) into `view`, so the registry is known
    before any data queue is derived. With a checkpoint that lists the state queue, its
    records up to the checkpoint come through that queue, and with `tail` (after a crash) the
    entries after the checkpoint's position are scanned for later ones; without one, the
    whole commitlog is scanned (a full rebuild reads it twice). Returns the records applied.
    Raises CorruptEntry when the state queue does not fit the checkpoint."""
    if ckpt is not None and ckpt.version < 4:
        return 0  # written by Gregor 1, whose commitlog holds no state records
    applied = 0
    start = None
    if ckpt is not None:
        bounds = ckpt.queues.get(queue_key(str(STATE_TOPIC_ID), 0))
        if bounds is None:
            raise CorruptEntry("the checkpoint lacks the state queue")
        q = ConsumeQueue.load(queue_dir(root / "consumequeue", STATE_META.name, 0), config.queue_entries_per_file)
        q.log_start, q.high_watermark = bounds
        _check_queue(q, commitlog, STATE_META.name, ckpt.write_position, empty_after=False)
        applied = replay_state(q, commitlog, view)
        start = ckpt.write_position
        if not tail:
            return applied
    state_id = STATE_TOPIC_ID.bytes
    for e in commitlog.scan(start):
        if isinstance(e, EntryHeader) and e.topic_id == state_id:
            applied += view.apply_batch(commitlog.view(e.batch_position, e.batch_size), e.base_offset)
    return applied


def replay_state(q: ConsumeQueue, commitlog: CommitLog, view: StateView) -> int:
    """Apply the state queue's records, log start to high watermark, to `view`."""
    applied = 0
    offset = q.log_start
    while offset < q.high_watermark:
        pos, size = q.entry(offset)
        batch = commitlog.view(pos, size) if size > 0 else None
        if batch is None:
            raise CorruptEntry(f"state queue entry {offset} is damaged or outside the commitlog")
        count = view.apply_batch(batch, offset)
        applied += count
        offset += max(count, 1)
    return applied


def load_trusted(root: Path, registry: TopicRegistry, config: StoreConfig, commitlog: CommitLog,
                 ckpt: Checkpoint) -> tuple[Partitions, KeyIndex]:
    """Map the derived files a clean shutdown left; raises CorruptEntry if any look wrong."""
    commitlog.restore(ckpt.write_position, ckpt.segments)
    partitions: Partitions = {}
    for meta in metas(registry):
        for p in range(meta.partitions):
            qdir = queue_dir(root / "consumequeue", meta.name, p)
            bounds = ckpt.queues.get(queue_key(str(meta.topic_id), p))
            if bounds is None and meta is STATE_META:  # a Gregor 1 data dir: no state topic yet
                partitions[(meta.name, p)] = Partition.of(meta, p, _fresh_queue(qdir, config))
                continue
            q = ConsumeQueue.load(qdir, config.queue_entries_per_file)
            if bounds is None:
                raise CorruptEntry(f"checkpoint lacks {meta.name}-{p}")
            q.log_start, q.high_watermark = bounds
            _check_queue(q, commitlog, f"{meta.name}-{p}", commitlog.write_position, empty_after=True)
            partitions[(meta.name, p)] = _from_checkpoint(Partition.of(meta, p, q), ckpt, crash=False)
    index = KeyIndex(root / "index", config.key_index_slots, config.key_index_entries)
    for f in index.files:
        if f.count and f.last_position >= commitlog.write_position:
            raise CorruptEntry(f"{f.path} points past the commitlog end")
    if config.verify_on_start:
        _verify(commitlog, partitions)
    return partitions, index


def _verify(commitlog: CommitLog, partitions: Partitions, until: int | None = None) -> None:
    """CRC-check the commitlog below `until` (default: the write position); mark the offsets
    of damaged bytes."""
    began = time.monotonic()
    regions = commitlog.verify(until)
    damage = Damage()
    for region in regions:
        damage.region(region)
        for part in partitions.values():
            q = part.queue
            first = q.first_offset_at_or_after(region.start)
            stop = q.first_offset_at_or_after(region.end)
            if first < stop:
                q.mark_corrupt(first, stop)
                damage.offsets(part, first, stop)
    damage.log()
    end = commitlog.write_position if until is None else min(until, commitlog.write_position)
    log.info("verified %d commitlog bytes in %.2f s (commitlog.verify.on.start)",
             max(0, end - commitlog.min_position), time.monotonic() - began)


class Damage:
    """What startup found damaged, for one log line per region and per partition."""

    def __init__(self) -> None:
        self.regions: list[CorruptRegion] = []
        self.ranges: dict[tuple[str, int], list[list[int]]] = {}

    def region(self, region: CorruptRegion) -> None:
        self.regions.append(region)

    def offsets(self, part: Partition, first: int, stop: int) -> None:
        ranges = self.ranges.setdefault((part.topic, part.index), [])
        if ranges and ranges[-1][1] == first:
            ranges[-1][1] = stop
        else:
            ranges.append([first, stop])

    def log(self) -> None:
        for r in self.regions:
            log.error("commitlog bytes [%d, %d) are corrupt (CRC-32C mismatch); kept on disk, not served",
                      r.start, r.end)
        for (topic, partition), ranges in sorted(self.ranges.items()):
            for first, stop in ranges:
                log.error("corrupt data: topic %s partition %d offsets %d-%d (%d offsets) read as "
                          "CORRUPT_MESSAGE; earlier and later offsets stay readable",
                          topic, partition, first, stop - 1, stop - first)
        if self.regions and not self.ranges:
            log.error("the corrupt commitlog bytes held no offsets of a live topic")


def _check_queue(q: ConsumeQueue, commitlog: CommitLog, name: str, end: int, empty_after: bool) -> None:
    """The queue's bounds fit a commitlog ending at `end`; with `empty_after`, nothing lies
    past its high watermark (after a crash, what does is cleared instead)."""
    if q.log_start > q.high_watermark:
        raise CorruptEntry(f"queue {name}: log start beyond high watermark")
    if q.high_watermark > q.log_start:
        pos, size = q.entry(q.high_watermark - 1)
        if size == 0 or pos + max(size, 0) > end or pos < commitlog.min_position:
            raise CorruptEntry(f"queue {name}: last entry does not match the commitlog")
    if empty_after and q.entry(q.high_watermark)[1] != 0:
        raise CorruptEntry(f"queue {name}: entries beyond the high watermark")


def rebuild(root: Path, registry: TopicRegistry, config: StoreConfig, commitlog: CommitLog,
            ckpt: Checkpoint | None) -> tuple[Partitions, KeyIndex]:
    """Scan the whole commitlog (truncating a torn tail) and re-derive queues and the key index."""
    qroot = root / "consumequeue"
    shutil.rmtree(qroot, ignore_errors=True)
    index = KeyIndex.fresh(root / "index", config.key_index_slots, config.key_index_entries)
    per_file = config.queue_entries_per_file
    partitions: Partitions = {}
    damage = Damage()

    def new_queue(meta: TopicMeta, partition: int, first_offset: int) -> Partition:
        q = ConsumeQueue.create(queue_dir(qroot, meta.name, partition), per_file, first_offset)
        part = partitions[(meta.name, partition)] = Partition.of(meta, partition, q)
        return part

    entries = _dispatch(commitlog, commitlog.scan(), registry, partitions, index, damage, new_queue, rebuild=True)
    for meta in metas(registry):
        for p in range(meta.partitions):
            bounds = ckpt.queues.get(queue_key(str(meta.topic_id), p)) if ckpt else None
            part = partitions.get((meta.name, p))
            if part is None:
                new_queue(meta, p, bounds[1] if bounds else 0)
            elif bounds and bounds[1] > part.queue.high_watermark and damage.regions:
                # offsets a checkpoint saw are gone: never hand them out again
                _lose(part, damage, bounds[1], commitlog.write_position)
    for part in partitions.values():
        if not part.epochs.entries:  # no batch said otherwise: led by this store, epoch 0
            part.epochs.assign(0, part.queue.log_start)
        if part.txns is not None and irregular(part):  # relocated copies lie out of offset order
            rederive_transactions(part, commitlog)
    damage.log()
    log.info("rebuilt consume queues and key index from %d commitlog entries", entries)
    return partitions, index


def recover_from_checkpoint(root: Path, registry: TopicRegistry, config: StoreConfig, commitlog: CommitLog,
                            ckpt: Checkpoint) -> tuple[Partitions, KeyIndex]:
    """After a crash: trust the derived files up to the last checkpoint, whose bytes were made
    durable before it was saved, and re-derive only the commitlog entries written after its
    position (scanned and validated, a torn tail truncated). Raises CorruptEntry when the
    derived files do not fit the checkpoint; the caller then rebuilds everything."""
    if ckpt.key_index is None:
        raise CorruptEntry("the checkpoint predates recovery from checkpoints (format 1)")
    start = ckpt.write_position
    if not commitlog.min_position <= start <= commitlog.segments[-1].end:
        raise CorruptEntry(f"checkpoint position {start} is outside the commitlog")
    began = time.monotonic()
    for seg in commitlog.segments:
        seg.newest_timestamp = ckpt.segments.get(seg.start, -1)
    partitions: Partitions = {}
    for meta in metas(registry):
        for p in range(meta.partitions):
            qdir = queue_dir(root / "consumequeue", meta.name, p)
            if meta is STATE_META and ckpt.version < 4:
                _fresh_queue(qdir, config)  # a Gregor 1 data dir: no state topic yet
            q = ConsumeQueue.load(qdir, config.queue_entries_per_file)
            # absent: the partition was created after the checkpoint, so all of it follows
            q.log_start, q.high_watermark = ckpt.queues.get(queue_key(str(meta.topic_id), p), (0, 0))
            _check_queue(q, commitlog, f"{meta.name}-{p}", start, empty_after=False)
            q.clear_after(q.high_watermark)
            partitions[(meta.name, p)] = _from_checkpoint(Partition.of(meta, p, q), ckpt, crash=True)
    index = KeyIndex(root / "index", config.key_index_slots, config.key_index_entries)
    index.truncate(ckpt.key_index)
    damage = Damage()

    def no_queue(meta: TopicMeta, partition: int, first_offset: int) -> Partition:
        raise CorruptEntry(f"no consume queue for {meta.name}-{partition}")

    entries = _dispatch(commitlog, commitlog.scan(start), registry, partitions, index, damage, no_queue)
    for part in partitions.values():
        q = part.queue
        q.clear_after(q.high_watermark)
        if irregular(part):  # positions out of offset order: no bisection (store/compaction.py)
            q.forget_below(commitlog.min_position, part.deletes)
        else:
            q.advance_log_start(q.first_offset_at_or_after(commitlog.min_position))
    damage.log()
    log.info("recovered from the checkpoint at commitlog position %d: %d later entries re-derived "
             "(%d bytes) in %.2f s", start, entries, commitlog.write_position - start, time.monotonic() - began)
    if config.verify_on_start:
        _verify(commitlog, partitions, until=start)  # the scan above checked what follows
    return partitions, index


def _dispatch(commitlog: CommitLog, scan: Iterator[EntryHeader | CorruptRegion], registry: TopicRegistry,
              partitions: Partitions, index: KeyIndex, damage: Damage, new_queue, rebuild: bool = False) -> int:
    """Derive queue entries and key-index entries from scanned commitlog entries; returns how many.
    A relocated batch (the log cleaner's) takes over the offsets it keeps. In a `rebuild`, a
    compacted partition's log starts at its lowest offset found, and offsets no entry holds
    are gaps: retention deleted the segments of the batches the cleaner had dropped or
    relocated (elsewhere missing offsets are damage)."""
    live = {meta.topic_id.bytes: meta for meta in metas(registry)}
    entries = 0

    def partition_for(e: EntryHeader) -> Partition | None:
        meta = live.get(e.topic_id)
        if meta is None or e.partition >= meta.partitions or meta.name != e.topic:
            return None  # a deleted topic's entry (or an older incarnation): stays dead
        part = partitions.get((meta.name, e.partition))
        return new_queue(meta, e.partition, e.base_offset) if part is None else part

    last_damage = -1  # where the newest corrupt region starts: lost offsets are placed there
    for e in scan:
        if isinstance(e, CorruptRegion):
            damage.region(e)
            last_damage = e.start
            claimed = e.claimed
            part = partition_for(claimed) if claimed is not None else None
            if part is not None and claimed.base_offset == part.queue.high_watermark:
                _lose(part, damage, claimed.base_offset + claimed.record_count, e.start)
            continue
        part = partition_for(e)
        if part is None:
            continue
        q = part.queue
        if e.flags & RELOCATED:
            batch = commitlog.view(e.batch_position, e.batch_size)
            if rebuild:
                q.log_start = min(q.log_start, e.base_offset)
                if batch[ATTRIBUTES_LOW] & TXN_BITS:
                    transactions_of(part)  # derived after the scan, from the batches in offset order
            relocate(part, batch, e.batch_position, e.batch_size)
            entries += 1
            continue
        if e.base_offset < q.high_watermark:
            continue
        if e.base_offset > q.high_watermark and irregular(part) and rebuild:
            q.reserve(q.high_watermark, e.base_offset - q.high_watermark)
            q.high_watermark = e.base_offset  # a gap
        if e.base_offset > q.high_watermark:  # offsets are contiguous: the missing ones were damaged
            previous = q.entry(q.high_watermark - 1)[0] if q.high_watermark > q.log_start else -1
            _lose(part, damage, e.base_offset, last_damage if last_damage > previous else e.position)
        batch = commitlog.view(e.batch_position, e.batch_size)
        note_epoch(part, batch, e.base_offset)
        q.reserve(e.base_offset, e.record_count)  # a full disk fails the start, never SIGBUS
        txn = batch[ATTRIBUTES_LOW] & TXN_BITS
        if txn & CONTROL_BIT:
            reserve_marker(part)
        to_queue(part, e.base_offset, e.record_count, e.batch_position, e.batch_size, tags_of(part, batch),
                 e.max_timestamp)  # keys: the store's KeyDispatcher, from the checkpoint's key position
        if txn:
            to_transactions(part, batch, e.base_offset)
        entries += 1
    return entries


def _from_checkpoint(part: Partition, ckpt: Checkpoint, crash: bool) -> Partition:
    """The partition's epoch history as the checkpoint saved it (default: epoch 0 from its log
    start), whether the log cleaner has touched its queue, and its transactions; recovery's
    scan of later entries adds what followed. After a `crash`, aborted-index entries past the
    checkpoint's high watermark are cut (the scan derives them again). Raises CorruptEntry
    when the index file does not end where the checkpoint says."""
    key = queue_key(str(uuid.UUID(bytes=part.topic_id)), part.index)
    saved = ckpt.epochs.get(key)
    part.epochs = EpochCache(saved or [(0, part.queue.log_start)])
    part.relocated = key in ckpt.cleaned
    txns = ckpt.transactions.get(key)
    q = part.queue
    if txns is None and not (q.directory / ABORTED_INDEX).exists():
        return part
    open_txns, last = txns or ({}, None)
    part.txns = index = Transactions.load(q.directory)
    if crash:
        index.cut(q.high_watermark)
    # after the checkpoint, entries below its log start may have been dropped (Transactions.drop_below)
    if index.last_aborted != last and not (last is not None and last < q.log_start and index.last_aborted is None):
        raise CorruptEntry(f"the aborted-transactions index of {part.topic}-{part.index} ends at "
                           f"{index.last_aborted}, the checkpoint says {last}")
    index.restore(open_txns)
    return part


def _fresh_queue(qdir: Path, config: StoreConfig) -> ConsumeQueue:
    shutil.rmtree(qdir, ignore_errors=True)
    return ConsumeQueue.create(qdir, config.queue_entries_per_file)


def _lose(part: Partition, damage: Damage, stop: int, position: int) -> None:
    """Mark offsets [high watermark, stop) corrupt (their batch is damaged) and move past them."""
    q = part.queue
    first = q.high_watermark
    q.reserve(first, stop - first)
    q.mark_corrupt(first, stop, position)
    q.high_watermark = stop
    damage.offsets(part, first, stop)
