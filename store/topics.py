"""Topic metadata: names, partition counts, configs and topic ids, persisted in topics.json.

Owns the registry and its file (format version 1, replaced atomically on every change).
Never touches queues or the commitlog: the Store applies the consequences.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from store.atomic_file import replace
from store.errors import StoreError, TopicExists, UnknownTopic

FORMAT_VERSION = 1


@dataclass(frozen=True)
class TopicMeta:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


class TopicRegistry:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.topics: dict[str, TopicMeta] = {}
        if path.exists():
            doc = json.loads(path.read_text())
            if doc.get("version") != FORMAT_VERSION:
                raise StoreError(f"{path}: unsupported topics format {doc.get('version')}")
            for name, t in doc["topics"].items():
                self.topics[name] = TopicMeta(name, t["partitions"], dict(t["configs"]),
                                              uuid.UUID(t["topic_id"]))

    def _save(self) -> None:
        doc = {"version": FORMAT_VERSION, "topics": {
            t.name: {"partitions": t.partitions, "configs": t.configs, "topic_id": str(t.topic_id)}
            for t in self.topics.values()}}
        replace(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

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

    def create(self, name: str, partitions: int, configs: dict[str, str],
               topic_id: uuid.UUID | None = None) -> TopicMeta:
        self.check_new(name, partitions)
        meta = TopicMeta(name, partitions, dict(configs), topic_id or uuid.uuid4())
        self.topics[name] = meta
        self._save()
        return meta

    def update(self, meta: TopicMeta) -> TopicMeta:
        self.get(meta.name)
        self.topics[meta.name] = meta
        self._save()
        return meta

    def delete(self, name: str) -> None:
        self.get(name)
        del self.topics[name]
        self._save()
