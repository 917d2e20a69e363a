"""Exceptions the store raises; the broker maps them onto Kafka error codes.

Owns the error vocabulary only. Never imports protocol error codes: the mapping is the broker's.
"""


class StoreError(Exception):
    """Base class of every store error."""


class TopicExists(StoreError):
    pass


class AdminBusy(StoreError):
    """Another topic change is under way and the caller asked not to wait for it."""


class UnknownTopic(StoreError):
    pass


class UnknownPartition(StoreError):
    pass


class OffsetOutOfRange(StoreError):
    pass


class StorageFull(StoreError):
    """Out of disk space while allocating or writing; nothing was written, retry later."""


class QueueFilesUnavailable(StoreError):
    """A topic's queue files could not be made (out of open files, or an I/O error); the topic
    change did not happen and nothing of it is left behind."""


class CorruptEntry(StoreError):
    """Derived files (consume queues, key index, checkpoint) that cannot be trusted."""


class CorruptData(StoreError):
    """Offsets whose commitlog bytes failed their CRC: they read as this error, never as data."""

    def __init__(self, topic: str, partition: int, first_offset: int, next_offset: int) -> None:
        super().__init__(f"{topic}-{partition} offsets [{first_offset}, {next_offset}) are corrupt on disk")
        self.first_offset = first_offset
        self.next_offset = next_offset  # the first offset after the damaged range


class EntryTooLarge(StoreError):
    """A batch that cannot fit in one commitlog segment."""


class BatchCrcMismatch(StoreError):
    """A piped batch (store/piped.py) whose CRC failed once its bytes were in the commitlog's
    file: refused, and zeros written over them; Kafka answers CORRUPT_MESSAGE."""


class LogDirOffline(StoreError):
    """The commitlog failed an fsync or a write: the store refuses every append from then on, and
    keeps serving reads, until the broker restarts (Kafka takes the log directory offline)."""


class ReplicationError(StoreError):
    """Shipped commitlog bytes that cannot be applied here: not valid entries, not at this
    log's end, or offsets that do not continue this log's partitions (a diverged log)."""
