"""A fetch racing DeleteTopics: the handler checks the topic, then reads the store, and a
delete in a worker thread can land in between. Either way the partition answers
UNKNOWN_TOPIC_OR_PARTITION, as for a topic that is not there, and the fetch goes on."""

from __future__ import annotations

from types import SimpleNamespace

from broker.fetch_sessions import FetchPartition
from broker.handlers.fetch import _read_all
from broker.topology import SingleNode
from protocol.errors import ErrorCode
from store import Store
from tests.store.conftest import append, build_batch, tiny_config

BODY = SimpleNamespace(max_bytes=1 << 20, isolation_level=0)


def _fetch(topic: str) -> list:
    return [((topic, 0), FetchPartition(topic, 0, 1 << 20))]


def test_a_topic_deleted_between_the_check_and_the_read_is_unknown(tmp_path):
    store = Store.open(tmp_path, tiny_config())
    try:
        for name in ("gone", "cleared", "kept"):
            store.create_topic(name, 1, {})
            append(store, name, 0, build_batch([b"v"]))
        metas = store.topics()  # what the handler's check saw, before the deletes
        stale = store._parts["cleared"]
        store.delete_topic("gone")  # gone before the read looks it up
        store.delete_topic("cleared")
        store._parts["cleared"] = stale  # the read had looked it up; its files went meanwhile
        broker = SimpleNamespace(store=store, topic=metas.get, topology=SingleNode(store, 0, None, print),
                                 config={"replica.selector.class": ""})
        for name in ("gone", "cleared"):
            topics, size, has_error = _read_all(broker, BODY, 11, _fetch(name))
            assert has_error and size == 0
            assert [r.error_code for _, _, r in topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        topics, size, has_error = _read_all(broker, BODY, 11, _fetch("kept"))
        assert not has_error and size > 0
    finally:
        store.close()
