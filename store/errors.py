"""Exceptions the store raises; the broker maps them onto Kafka error codes.

Owns the error vocabulary only. Never imports protocol error codes: the mapping is the broker's.
"""


class StoreError(Exception):
    """Base class of every store error."""


class TopicExists(StoreError):
    pass


class UnknownTopic(StoreError):
    pass


class UnknownPartition(StoreError):
    pass


class OffsetOutOfRange(StoreError):
    pass


class StorageFull(StoreError):
    """Out of disk space while allocating or writing; nothing was written, retry later."""


class CorruptEntry(StoreError):
    pass


class EntryTooLarge(StoreError):
    """A batch that cannot fit in one commitlog segment."""
