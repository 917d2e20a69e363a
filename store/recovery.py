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
from collections.abc import Iterator
from pathlib import Path

from store.checkpoint import Checkpoint, queue_key
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.dispatch import tags_of, to_queue
from store.entry import EntryHeader
from store.errors import CorruptEntry
from store.key_index import KeyIndex
from store.partition import Partition, queue_dir
from store.segment_walk import CorruptRegion
from store.topics import TopicMeta, TopicRegistry

log = logging.getLogger(__name__)

Partitions = dict[tuple[str, int], Partition]


def load_trusted(root: Path, registry: TopicRegistry, config: StoreConfig, commitlog: CommitLog,
                 ckpt: Checkpoint) -> tuple[Partitions, KeyIndex]:
    """Map the derived files a clean shutdown left; raises CorruptEntry if any look wrong."""
    commitlog.restore(ckpt.write_position, ckpt.segments)
    partitions: Partitions = {}
    for meta in registry.topics.values():
        for p in range(meta.partitions):
            q = ConsumeQueue.load(queue_dir(root / "consumequeue", meta.name, p),
                                  config.queue_entries_per_file)
            bounds = ckpt.queues.get(queue_key(str(meta.topic_id), p))
            if bounds is None:
                raise CorruptEntry(f"checkpoint lacks {meta.name}-{p}")
            q.log_start, q.high_watermark = bounds
            _check_queue(q, commitlog, f"{meta.name}-{p}", commitlog.write_position, empty_after=True)
            partitions[(meta.name, p)] = Partition.of(meta, p, q)
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

    entries = _dispatch(commitlog, commitlog.scan(), registry, partitions, index, damage, new_queue)
    for meta in registry.topics.values():
        for p in range(meta.partitions):
            bounds = ckpt.queues.get(queue_key(str(meta.topic_id), p)) if ckpt else None
            part = partitions.get((meta.name, p))
            if part is None:
                new_queue(meta, p, bounds[1] if bounds else 0)
            elif bounds and bounds[1] > part.queue.high_watermark and damage.regions:
                # offsets a checkpoint saw are gone: never hand them out again
                _lose(part, damage, bounds[1], commitlog.write_position)
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
    for meta in registry.topics.values():
        for p in range(meta.partitions):
            q = ConsumeQueue.load(queue_dir(root / "consumequeue", meta.name, p), config.queue_entries_per_file)
            # absent: the partition was created after the checkpoint, so all of it follows
            q.log_start, q.high_watermark = ckpt.queues.get(queue_key(str(meta.topic_id), p), (0, 0))
            _check_queue(q, commitlog, f"{meta.name}-{p}", start, empty_after=False)
            q.clear_after(q.high_watermark)
            partitions[(meta.name, p)] = Partition.of(meta, p, q)
    index = KeyIndex(root / "index", config.key_index_slots, config.key_index_entries)
    index.truncate(ckpt.key_index)
    damage = Damage()

    def no_queue(meta: TopicMeta, partition: int, first_offset: int) -> Partition:
        raise CorruptEntry(f"no consume queue for {meta.name}-{partition}")

    entries = _dispatch(commitlog, commitlog.scan(start), registry, partitions, index, damage, no_queue)
    for part in partitions.values():
        q = part.queue
        q.clear_after(q.high_watermark)
        q.advance_log_start(q.first_offset_at_or_after(commitlog.min_position))
    damage.log()
    log.info("recovered from the checkpoint at commitlog position %d: %d later entries re-derived "
             "(%d bytes) in %.2f s", start, entries, commitlog.write_position - start, time.monotonic() - began)
    if config.verify_on_start:
        _verify(commitlog, partitions, until=start)  # the scan above checked what follows
    return partitions, index


def _dispatch(commitlog: CommitLog, scan: Iterator[EntryHeader | CorruptRegion], registry: TopicRegistry,
              partitions: Partitions, index: KeyIndex, damage: Damage, new_queue) -> int:
    """Derive queue entries and key-index entries from scanned commitlog entries; returns how many."""
    live = {meta.topic_id.bytes: meta for meta in registry.topics.values()}
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
        if e.base_offset < q.high_watermark:
            continue
        if e.base_offset > q.high_watermark:  # offsets are contiguous: the missing ones were damaged
            previous = q.entry(q.high_watermark - 1)[0] if q.high_watermark > q.log_start else -1
            _lose(part, damage, e.base_offset, last_damage if last_damage > previous else e.position)
        batch = commitlog.view(e.batch_position, e.batch_size)
        q.reserve(e.base_offset, e.record_count)  # a full disk fails the start, never SIGBUS
        to_queue(part, e.base_offset, e.record_count, e.batch_position, e.batch_size, tags_of(part, batch),
                 e.max_timestamp)  # keys: the store's KeyDispatcher, from the checkpoint's key position
        entries += 1
    return entries


def _lose(part: Partition, damage: Damage, stop: int, position: int) -> None:
    """Mark offsets [high watermark, stop) corrupt (their batch is damaged) and move past them."""
    q = part.queue
    first = q.high_watermark
    q.reserve(first, stop - first)
    q.mark_corrupt(first, stop, position)
    q.high_watermark = stop
    damage.offsets(part, first, stop)
