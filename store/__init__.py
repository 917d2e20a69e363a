"""Gregor's storage engine: a MetaQ/RocketMQ-style commitlog with per-partition consume queues.

The public surface is re-exported here; everything else is internal to the package.
"""

from store.config import StoreConfig
from store.errors import (
    AdminBusy,
    BatchCrcMismatch,
    CorruptData,
    CorruptEntry,
    EntryTooLarge,
    OffsetOutOfRange,
    QueueFilesUnavailable,
    StorageFull,
    StoreError,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
)
from store.flush import FlushHandle
from store.offsets import OffsetStore
from store.partition import TAG_HEADER
from store.piped import PipedBatch
from store.records import StoredRecord, tag_hash
from store.store import AppendResult, ReadResult, Store
from store.topics import TopicMeta

__all__ = [
    "TAG_HEADER",
    "AdminBusy",
    "AppendResult",
    "BatchCrcMismatch",
    "CorruptData",
    "CorruptEntry",
    "EntryTooLarge",
    "FlushHandle",
    "OffsetOutOfRange",
    "OffsetStore",
    "PipedBatch",
    "QueueFilesUnavailable",
    "ReadResult",
    "StorageFull",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoredRecord",
    "TopicExists",
    "TopicMeta",
    "UnknownPartition",
    "UnknownTopic",
    "tag_hash",
]
