"""Topic metadata: names, partition counts, configs and topic ids, in memory.

Owns the registry. Never touches queues or the commitlog: the Store writes each change as a
record of the state topic (store/state.py) and applies the consequences.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from store.errors import StoreError, TopicExists, UnknownTopic

RESERVED_PREFIX = "__gregor_"  # internal topics (store/state.py)


@dataclass(frozen=True)
class TopicMeta:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


class TopicRegistry:
    """The topics in memory. Durable as records of the state topic (store/state.py): the
    store appends a topic's record and the state view applies it here, in commitlog order."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMeta] = {}
        self.names_by_id: dict[uuid.UUID, str] = {}  # requests that name topics by id (Fetch v13+)

    def apply(self, name: str, meta: TopicMeta | None) -> None:
        old = self.topics.pop(name, None) if meta is None else self.topics.get(name)
        if old is not None and self.names_by_id.get(old.topic_id) == name:
            del self.names_by_id[old.topic_id]
        if meta is not None:
            self.topics[name] = meta
            self.names_by_id[meta.topic_id] = name

    def clear(self) -> None:
        self.topics.clear()
        self.names_by_id.clear()

    def get(self, name: str) -> TopicMeta:
        try:
            return self.topics[name]
        except KeyError:
            raise UnknownTopic(name) from None

    def check_new(self, name: str, partitions: int) -> None:
        """Raise unless a topic `name` with this many partitions could be created now."""
        if name in self.topics:
            raise TopicExists(name)
        if partitions < 1:
            raise StoreError("a topic needs at least one partition")
        if not name or len(name.encode()) > 249 or "/" in name or name in (".", ".."):
            raise StoreError(f"invalid topic name {name!r}")
        if name.startswith(RESERVED_PREFIX):
            raise StoreError(f"invalid topic name {name!r}: names starting with {RESERVED_PREFIX} are "
                             "reserved for Gregor's internal topics")
