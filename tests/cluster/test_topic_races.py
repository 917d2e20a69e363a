"""A master makes a new topic twice over (broker/cluster/topics.py): CreateTopics writes the
ZooKeeper record and then makes the topic in the commitlog, while the record's change wakes
sync(), which makes every topic the record lists and the commitlog lacks. Whichever of the two
comes second finds the topic made, with the record's id: CreateTopics answers success (before,
it deleted the record and failed, so the next sync deleted the topic), and sync() logs nothing
(before: a warning per topic, seen in a 10,000-partition benchmark)."""

from __future__ import annotations

import logging
import uuid
from types import SimpleNamespace

import trio

from broker.cluster.topics import ClusterTopics
from broker.cluster.zk import ZooKeeper
from store import Store
from tests.store.conftest import tiny_config


class _Store:
    """The real store, with a hook run before its first create_topic (in the worker thread) and
    a stale topics() snapshot when asked for one: the two interleavings, made certain."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.before_create = None  # called once, in create_topic's thread
        self.stale_topics: dict | None = None

    def create_topic(self, *args, **kwargs):
        hook, self.before_create = self.before_create, None
        if hook is not None:
            hook()
        return self.store.create_topic(*args, **kwargs)

    def topics(self):
        stale, self.stale_topics = self.stale_topics, None
        return stale if stale is not None else self.store.topics()

    def __getattr__(self, name):
        return getattr(self.store, name)


def _master(zookeeper, tmp_path):
    zk = ZooKeeper(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:12]}", "a", 4000, lambda: None)
    zk.start(10)
    store = _Store(Store.open(tmp_path / "data", tiny_config()))
    cluster = SimpleNamespace(group="a", groups={}, group_names=lambda: ["a"], zk=zk, store=store, leading=True)
    return zk, store, ClusterTopics(cluster)


def test_create_topics_succeeds_when_sync_made_the_topic_from_its_record_first(zookeeper, tmp_path, caplog):
    zk, store, topics = _master(zookeeper, tmp_path)
    try:
        # sync() runs between the record's write and CreateTopics' own create_topic
        store.before_create = lambda: trio.from_thread.run(topics.sync)
        with caplog.at_level(logging.WARNING, logger="gregor"):
            meta = trio.run(topics.create_topic, "orders", 3, {"retention.ms": "60000"})
        assert meta.partitions == 3 and meta.configs == {"retention.ms": "60000"}
        records, deleted = zk.topics()
        assert str(meta.topic_id) == records["orders"][0].topic_id and not deleted  # the record kept
        assert store.topic("orders").topic_id == meta.topic_id
        trio.run(topics.sync)  # and nothing deletes it after
        assert store.topic("orders").topic_id == meta.topic_id
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("gregor")]
    finally:
        store.close()
        zk.stop()


def test_sync_says_nothing_when_create_topics_made_the_topic_first(zookeeper, tmp_path, caplog):
    zk, store, topics = _master(zookeeper, tmp_path)
    try:
        meta = trio.run(topics.create_topic, "orders", 2, {})
        store.stale_topics = {}  # sync() looked before CreateTopics made it in the commitlog
        with caplog.at_level(logging.WARNING, logger="gregor"):
            trio.run(topics.sync)
        assert store.topic("orders").topic_id == meta.topic_id
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("gregor")]
        # another incarnation's record still gets its warning: that one is not made
        store.stale_topics = {}
        topics.version = None
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gregor"):
            trio.run(topics._reconcile, {"orders": (SimpleNamespace(topic_id=str(uuid.uuid4()), placement=("a",),
                                                                     configs={}), 0)}, set())
        assert any("not made as ZooKeeper has it" in r.getMessage() for r in caplog.records)
    finally:
        store.close()
        zk.stop()
