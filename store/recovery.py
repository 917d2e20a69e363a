"""Opening derived state: trust it after a clean shutdown, else rebuild it from the commitlog.

Owns validating consume queues and key-index files against the checkpoint and the commitlog
end, and the full rebuild (scan + torn-tail truncation, then re-deriving every queue and the
key index). Never trusts a queue that is missing, mis-sized or points past the commitlog end.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from store import records
from store.checkpoint import Checkpoint, queue_key
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.errors import CorruptEntry
from store.key_index import KeyIndex
from store.partition import Partition, queue_dir
from store.topics import TopicRegistry

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
            _check_queue(q, commitlog, f"{meta.name}-{p}")
            partitions[(meta.name, p)] = Partition.of(meta, p, q)
    index = KeyIndex(root / "index", config.key_index_slots, config.key_index_entries)
    for f in index.files:
        if f.count and f.last_position >= commitlog.write_position:
            raise CorruptEntry(f"{f.path} points past the commitlog end")
    return partitions, index


def _check_queue(q: ConsumeQueue, commitlog: CommitLog, name: str) -> None:
    if q.log_start > q.high_watermark:
        raise CorruptEntry(f"queue {name}: log start beyond high watermark")
    if q.high_watermark > q.log_start:
        pos, size = q.entry(q.high_watermark - 1)
        if size <= 0 or pos + size > commitlog.write_position or pos < commitlog.min_position:
            raise CorruptEntry(f"queue {name}: last entry does not match the commitlog")
    if q.entry(q.high_watermark)[1] != 0:
        raise CorruptEntry(f"queue {name}: entries beyond the high watermark")


def rebuild(root: Path, registry: TopicRegistry, config: StoreConfig, commitlog: CommitLog,
            ckpt: Checkpoint | None) -> tuple[Partitions, KeyIndex]:
    """Scan the whole commitlog (truncating a torn tail) and re-derive queues and the key index."""
    qroot = root / "consumequeue"
    shutil.rmtree(qroot, ignore_errors=True)
    index = KeyIndex.fresh(root / "index", config.key_index_slots, config.key_index_entries)
    live = {meta.topic_id.bytes: meta for meta in registry.topics.values()}
    per_file = config.queue_entries_per_file
    partitions: Partitions = {}
    entries = 0
    for e in commitlog.scan():
        meta = live.get(e.topic_id)
        if meta is None or e.partition >= meta.partitions or meta.name != e.topic:
            continue  # a deleted topic's entry (or an older incarnation): stays dead
        part = partitions.get((meta.name, e.partition))
        if part is None:
            q = ConsumeQueue.create(queue_dir(qroot, meta.name, e.partition), per_file, e.base_offset)
            part = partitions[(meta.name, e.partition)] = Partition.of(meta, e.partition, q)
        q = part.queue
        if e.base_offset < q.high_watermark:
            continue
        batch = commitlog.view(e.batch_position, e.batch_size)
        if part.tag_header is None:
            q.put(e.base_offset, e.record_count, e.batch_position, e.batch_size)
        else:
            q.put_tagged(e.base_offset, e.record_count, e.batch_position, e.batch_size,
                         records.tag_hashes(batch, part.tag_header))
        if part.key_indexed:
            for delta, key in records.keyed_records(batch):
                index.add(records.key_hash(meta.name, key), e.batch_position, e.store_timestamp, delta)
        q.high_watermark = e.base_offset + e.record_count
        entries += 1
    for meta in registry.topics.values():
        for p in range(meta.partitions):
            if (meta.name, p) not in partitions:
                start = ckpt.queues.get(queue_key(str(meta.topic_id), p), (0, 0))[1] if ckpt else 0
                q = ConsumeQueue.create(queue_dir(qroot, meta.name, p), per_file, start)
                partitions[(meta.name, p)] = Partition.of(meta, p, q)
    log.info("rebuilt consume queues and key index from %d commitlog entries", entries)
    return partitions, index
