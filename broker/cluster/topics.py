"""Topics across the broker groups of a cluster (docs/replication.md, *Several broker groups*):
each topic's record in ZooKeeper (id, configs, each partition's group), made in every group's
commitlog by its master, and the placement every node answers Metadata and routes requests by.

A topic change takes the name or the record in ZooKeeper first (create fails if it exists,
changes compare-and-set), then changes this group's commitlog; the other masters make theirs
match when /topics_changed moves. Blocking calls (ZooKeeper, the store's topic changes) run in
worker threads.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

import trio

from broker.cluster.state import TopicRecord, groups_with_master, place
from broker.cluster.zk import ZooKeeper
from store import AdminBusy, Store, StoreError, TopicExists, TopicMeta, UnknownTopic
from store.topics import RESERVED_PREFIX


class Node(Protocol):
    """What the topics across groups need of this node (broker/cluster/node.py's Cluster)."""

    store: Store
    zk: ZooKeeper
    group: str
    nursery: trio.Nursery | None

    @property
    def leading(self) -> bool: ...
    async def until_applied(self, done: Callable[[], bool]) -> bool: ...

log = logging.getLogger("gregor.cluster")


class ClusterTopics:
    def __init__(self, cluster: Node) -> None:
        self.cluster = cluster
        self.placements: dict[str, tuple[str, ...]] = {}  # topic -> each partition's broker group
        self.version = -1  # of /topics_changed when this node last read the topics (-1: read them)
        self._creating: set[str] = set()  # topics being auto-created

    async def _placement(self, name: str, have: tuple[str, ...], total: int,
                         configs: dict[str, str]) -> tuple[str, ...]:
        """Where partitions go: a view's where its source's are (it reads them there), others
        round-robin over the groups ZooKeeper has a master record for now. Read here, not taken
        from the last step: a group whose master was elected a moment ago gets its share (as
        Kafka's controller places replicas on every registered broker)."""
        source = self.placements.get(configs.get("view.source", ""))
        if source is not None and len(source) >= total:
            return source[:total]
        groups = await trio.to_thread.run_sync(self.cluster.zk.groups)
        return place(name, have, total, groups_with_master(groups, self.cluster.group))

    def create_soon(self, name: str, partitions: int) -> None:
        """Auto-creation: Metadata answers at once, the topic is made meanwhile (at a follower
        too, as at any Kafka broker: its record in ZooKeeper, and the masters make it)."""
        if name not in self._creating and self.cluster.nursery is not None:
            self._creating.add(name)
            self.cluster.nursery.start_soon(self._auto_create, name, partitions)

    async def _auto_create(self, name: str, partitions: int) -> None:
        try:
            await self.create_topic(name, partitions, {})
        except StoreError as exc:  # TopicExists (another node was first) included
            log.debug("auto-creating %s: %s", name, exc)
        finally:
            self._creating.discard(name)

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        """A new topic: its record in ZooKeeper first (the name is taken there, atomically), then
        in this group's commitlog; the other groups' masters create it from the record. At a
        follower (auto-creation only) the record alone: its master creates the topic."""
        topic_id = uuid.uuid4()
        record = TopicRecord(str(topic_id), await self._placement(name, (), partitions, configs), dict(configs))
        if not await trio.to_thread.run_sync(self.cluster.zk.create_topic, name, record):
            raise TopicExists(name)
        self.placements[name] = record.placement
        if not self.cluster.leading:
            return TopicMeta(name, partitions, dict(configs), topic_id=topic_id)
        try:
            return await trio.to_thread.run_sync(
                functools.partial(self.cluster.store.create_topic, name, partitions, configs, topic_id=topic_id))
        except BaseException as exc:
            made = self.cluster.store.topic(name)
            if isinstance(exc, TopicExists) and made is not None and made.topic_id == topic_id:
                return made  # sync() made it from the record meanwhile (the record's change woke it)
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.cluster.zk.delete_topic, name, str(topic_id))
            raise

    async def delete_topic(self, name: str) -> None:
        meta = self.cluster.store.topic(name)
        if meta is None:
            raise UnknownTopic(name)
        await trio.to_thread.run_sync(self.cluster.zk.delete_topic, name, str(meta.topic_id))
        self.placements.pop(name, None)
        await trio.to_thread.run_sync(self.cluster.store.delete_topic, name)

    async def change_topic(self, name: str, partitions: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMeta:
        """More partitions (placed on the groups round-robin) or new configs: ZooKeeper's record
        by compare-and-set, then this group's commitlog (at a follower, configs only: its master
        writes them); AdminBusy if the record changed meanwhile."""
        topics, _ = await trio.to_thread.run_sync(self.cluster.zk.topics)
        meta = self.cluster.store.topic(name)
        if meta is None:
            raise UnknownTopic(name)
        old, version = topics.get(name, (TopicRecord(str(meta.topic_id), (self.cluster.group,) * meta.partitions,
                                                     dict(meta.configs)), -1))
        placement = (old.placement if partitions is None
                     else await self._placement(name, old.placement, partitions, old.configs))
        new = TopicRecord(old.topic_id, placement, old.configs if configs is None else dict(configs))
        written = (await trio.to_thread.run_sync(self.cluster.zk.create_topic, name, new) if version < 0
                   else await trio.to_thread.run_sync(self.cluster.zk.set_topic, name, new, version))
        if not written:
            raise AdminBusy(f"topic {name} changed meanwhile; try again")
        self.placements[name] = new.placement
        if not self.cluster.leading:  # configs at a follower: its master writes them (sync)
            store = self.cluster.store
            await self.cluster.until_applied(lambda: getattr(store.topic(name), "configs", None) == new.configs)
            return store.topic(name) or meta
        if partitions is not None:
            return await trio.to_thread.run_sync(self.cluster.store.add_partitions, name, partitions)
        return await trio.to_thread.run_sync(self.cluster.store.alter_topic_configs, name, dict(configs or {}))

    async def sync(self) -> None:
        """Read the topics again when they changed; a master makes its commitlog's topics match
        them (created, grown, reconfigured, deleted) and publishes the ones only it has (a
        single broker that joined a cluster)."""
        version = await trio.to_thread.run_sync(self.cluster.zk.topics_version)
        if version == self.version:
            return
        topics, deleted = await trio.to_thread.run_sync(self.cluster.zk.topics)
        self.placements = {name: record.placement for name, (record, _) in topics.items()}
        if self.cluster.leading:
            await self._reconcile(topics, deleted)
        self.version = version

    async def _reconcile(self, topics: dict[str, tuple[TopicRecord, int]], deleted: set[str]) -> None:
        have = {name: meta for name, meta in self.cluster.store.topics().items() if not name.startswith(RESERVED_PREFIX)}
        run = trio.to_thread.run_sync
        for name, (record, _) in topics.items():
            meta = have.get(name)
            try:
                if meta is not None and str(meta.topic_id) != record.topic_id:  # another incarnation
                    await run(self.cluster.store.delete_topic, name)
                    meta = None
                if meta is None:
                    await run(functools.partial(self.cluster.store.create_topic, name, len(record.placement),
                                                record.configs, topic_id=uuid.UUID(record.topic_id)))
                    continue
                if meta.partitions < len(record.placement):
                    await run(self.cluster.store.add_partitions, name, len(record.placement))
                if meta.configs != record.configs:
                    await run(self.cluster.store.alter_topic_configs, name, dict(record.configs))
            except StoreError as exc:  # another change of it under way, a full disk: the next change retries
                made = self.cluster.store.topic(name)
                if isinstance(exc, TopicExists) and made is not None and str(made.topic_id) == record.topic_id:
                    continue  # the CreateTopics that wrote the record made it meanwhile
                log.warning("topic %s not made as ZooKeeper has it: %s", name, exc)
        for name, meta in have.items():
            if name in topics:
                continue
            try:
                if str(meta.topic_id) in deleted:
                    await run(self.cluster.store.delete_topic, name)
                else:
                    await run(self.cluster.zk.create_topic, name, TopicRecord(
                        str(meta.topic_id), (self.cluster.group,) * meta.partitions, dict(meta.configs)))
            except StoreError as exc:
                log.warning("topic %s not deleted: %s", name, exc)
