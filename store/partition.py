"""The in-memory state of one topic-partition as the append path needs it.

Owns nothing on disk itself: it bundles the partition's consume queue with the
pre-encoded topic name/id and the per-topic features (tag header, key index) so an
append finds everything it needs with one dict lookup and one list index. Never does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from store.consume_queue import ConsumeQueue
from store.epochs import EpochCache
from store.time_index import TimeIndex
from store.topics import RESERVED_PREFIX, TopicMeta
from store.transactions import Transactions

TAG_HEADER = "tag.header"
KEY_INDEX_ENABLE = "key.index.enable"


@dataclass(slots=True, eq=False)
class Partition:
    topic: str
    index: int
    topic_bytes: bytes
    topic_id: bytes
    queue: ConsumeQueue
    tag_header: str | None
    key_indexed: bool
    time_index: TimeIndex | None = None
    # Replication: the epoch of the leader this store appends as (stamped into each batch),
    # the partition's epoch history, and a high watermark below the log end (the queue's
    # `high_watermark` field is the log end offset); None: the log end, as on a single node.
    leader_epoch: int = 0
    epochs: EpochCache = field(default_factory=EpochCache)
    hw: int | None = None
    internal: bool = False  # the state topic: may append into each segment's reserved end
    # cleanup.policy: `compact` in it (the log cleaner keeps the latest record per key; the
    # queue then has gaps and, once batches are relocated, positions out of offset order),
    # `delete` in it (retention deletes by time and size)
    compacted: bool = False
    deletes: bool = True
    # the log cleaner removed or relocated entries here (under cleanup.policy=compact, now or
    # before): the queue has gaps and positions out of offset order, so retention cannot bisect it
    relocated: bool = False
    cleaned_to: int = 0  # the log cleaner's point: offsets below it were cleaned (store/compaction.py)
    tombstone_ts: int | None = None  # the oldest tombstone's batch timestamp the last clean kept
    # open transactions and the aborted-transactions index (store/transactions.py): made at the
    # partition's first transactional batch, then kept (and listed in every checkpoint)
    txns: Transactions | None = None

    @classmethod
    def of(cls, meta: TopicMeta, index: int, queue: ConsumeQueue) -> Partition:
        part = cls(meta.name, index, meta.name.encode(), meta.topic_id.bytes, queue,
                   *features(meta.configs), internal=meta.name.startswith(RESERVED_PREFIX))
        part.compacted, part.deletes = cleanup_policy(meta.configs)
        return part

    def reconfigure(self, meta: TopicMeta) -> None:
        self.tag_header, self.key_indexed = features(meta.configs)
        self.compacted, self.deletes = cleanup_policy(meta.configs)


def features(configs: dict[str, str]) -> tuple[str | None, bool]:
    """(tag header, are keys indexed): keys are unless key.index.enable=false. On by default, as
    RocketMQ's messageIndexEnable: the keys are read by the key worker process
    (store/key_worker.py), off the broker's GIL."""
    return configs.get(TAG_HEADER) or None, configs.get(KEY_INDEX_ENABLE, "true").lower() == "true"


def irregular(part: Partition) -> bool:
    """May the partition's queue have gaps and positions out of offset order (store/compaction.py)?"""
    return part.compacted or part.relocated


def cleanup_policy(configs: dict[str, str]) -> tuple[bool, bool]:
    """(compact, delete): which of Kafka's cleanup policies the topic's cleanup.policy names."""
    policies = configs.get("cleanup.policy", "delete").replace(" ", "").lower().split(",")
    return "compact" in policies, "delete" in policies


def queue_dir(root: Path, topic: str, partition: int) -> Path:
    return root / topic / str(partition)
