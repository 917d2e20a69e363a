"""Topic metadata: persistence, partitions, configs, deletion without resurrection."""

from __future__ import annotations

import pytest

from store import StorageFull, Store, TopicExists, UnknownTopic
from tests.store.conftest import append, build_batch, tiny_config


def _crash(store: Store, data_dir) -> None:
    """Close, then remove the clean marker as if the process had died."""
    store.close()
    (data_dir / "clean_shutdown").unlink()


def test_topics_persist_with_ids_and_configs(data_dir):
    s = Store.open(data_dir, tiny_config())
    meta = s.create_topic("t", 3, {"tag.header": "tag"})
    assert meta.topic_id.int != 0
    with pytest.raises(TopicExists):
        s.create_topic("t", 1, {})
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert s.topics()["t"] == meta
    assert not (data_dir / "topics.json").exists()  # a record of the state topic (test_state.py)
    s.close()


def test_add_partitions_and_alter_configs(store):
    store.create_topic("t", 1, {})
    assert store.add_partitions("t", 3).partitions == 3
    append(store, "t", 2, build_batch([b"x"]))
    store.alter_topic_configs("t", {"tag.header": "tag"})
    append(store, "t", 2, build_batch([b"y"], headers=[[("tag", b"a")]]))
    assert store.tag_hashes("t", 2, 0, 2)[1] != 0
    assert store.topics()["t"].configs == {"tag.header": "tag"}


def test_delete_unknown_topic_raises(store):
    with pytest.raises(UnknownTopic):
        store.delete_topic("nope")


def test_deleted_topic_does_not_come_back_after_rebuild(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {"key.index.enable": "true"})
    append(s, "t", 0, build_batch([b"old1", b"old2"], keys=[b"k", b"k"]))
    old_id = s.message_id("t", 0, 0)
    s.delete_topic("t")
    assert not (data_dir / "consumequeue" / "t").exists()
    s.create_topic("t", 1, {"key.index.enable": "true"})
    append(s, "t", 0, build_batch([b"new"], keys=[b"k"]))
    _crash(s, data_dir)
    s = Store.open(data_dir, tiny_config())
    assert s.high_watermark("t", 0) == 1
    assert bytes(s.read("t", 0, 0, 1 << 20).batches[0][-4:-1]) == b"new"
    assert [h.value for h in s.lookup_key("t", b"k", 0, 2**62)] == [b"new"]
    assert s.lookup_message_id(old_id) is None
    s.close()


def _gate_queue_creation(monkeypatch, fail_at: int | None = None):
    """Make ConsumeQueue.create wait for `release` once it has made two queues."""
    import threading

    from store import store as store_module
    started, release = threading.Event(), threading.Event()
    real = store_module.ConsumeQueue.create
    made = []

    def gated(directory, per_file, first_offset=0):
        if len(made) == 2:
            started.set()
            assert release.wait(10)
        if fail_at is not None and len(made) == fail_at:
            raise OSError(28, "simulated: no space left on device")
        made.append(directory)
        return real(directory, per_file, first_offset)

    monkeypatch.setattr(store_module.ConsumeQueue, "create", staticmethod(gated))
    return started, release


def test_creating_a_topic_does_not_hold_up_appends(store, data_dir, monkeypatch):
    import threading

    from store import AdminBusy
    store.create_topic("busy", 1, {})
    started, release = _gate_queue_creation(monkeypatch)
    creator = threading.Thread(target=store.create_topic, args=("wide", 50, {}))
    creator.start()
    try:
        assert started.wait(10)
        assert append(store, "busy", 0, build_batch([b"during"])).base_offset == 0  # not blocked
        assert store.topic("wide") is None  # not visible half made
        with pytest.raises(AdminBusy):  # what the broker's event loop does (auto-create)
            store.create_topic("other", 1, {}, wait=False)
        second: list[BaseException] = []

        def create_again() -> None:
            try:
                store.create_topic("wide", 3, {})
            except BaseException as exc:  # noqa: BLE001  (the assertion below reports it)
                second.append(exc)

        again = threading.Thread(target=create_again)
        again.start()  # waits for the first creation, then finds the name taken
    finally:
        release.set()
        creator.join(10)
    again.join(10)
    assert len(second) == 1 and isinstance(second[0], TopicExists)
    assert store.topic("wide").partitions == 50
    assert append(store, "wide", 49, build_batch([b"x"])).base_offset == 0


def test_a_failed_creation_leaves_no_topic_and_no_files(store, data_dir, monkeypatch):
    _started, release = _gate_queue_creation(monkeypatch, fail_at=3)
    release.set()
    with pytest.raises(StorageFull):
        store.create_topic("doomed", 10, {})
    assert store.topic("doomed") is None
    assert not (data_dir / "consumequeue" / "doomed").exists()
    monkeypatch.undo()
    assert store.create_topic("doomed", 2, {}).partitions == 2


def test_a_topic_can_be_created_again_right_after_deletion(store, data_dir, monkeypatch):
    """Deletion removes the old files before a new topic of the same name makes its own."""
    import shutil
    import threading

    from store import store as store_module
    store.create_topic("again", 20, {})
    removing, finish = threading.Event(), threading.Event()
    real_rmtree = shutil.rmtree

    def slow_rmtree(path, *args, **kwargs):
        removing.set()
        assert finish.wait(10)
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(store_module.shutil, "rmtree", slow_rmtree)
    deleter = threading.Thread(target=store.delete_topic, args=("again",))
    deleter.start()
    assert removing.wait(10)  # the old topic is gone from view; its files are not yet
    creator = threading.Thread(target=store.create_topic, args=("again", 20, {}))
    creator.start()
    creator.join(0.3)
    assert creator.is_alive()  # it waits for the removal instead of racing it
    finish.set()
    deleter.join(10)
    creator.join(10)
    assert all((data_dir / "consumequeue" / "again" / str(p)).is_dir() for p in range(20))
    assert append(store, "again", 19, build_batch([b"x"])).base_offset == 0


def test_adding_partitions_makes_their_files_and_keeps_the_old_ones(store, data_dir):
    store.create_topic("grow", 2, {})
    append(store, "grow", 1, build_batch([b"before"]))
    assert store.add_partitions("grow", 5).partitions == 5
    assert append(store, "grow", 4, build_batch([b"new"])).base_offset == 0
    assert store.high_watermark("grow", 1) == 1
    assert sorted(int(p.name) for p in (data_dir / "consumequeue" / "grow").iterdir()) == [0, 1, 2, 3, 4]


def test_an_append_that_looked_its_partition_up_before_a_delete_is_refused(store):
    """Appends find their partition without the append lock, so one can hold a partition a
    concurrent delete_topic then removes: under the lock it must see that and refuse, not
    write into a queue whose files are going away."""
    store.create_topic("gone", 2, {})
    batch = build_batch([b"v"])
    append(store, "gone", 1, batch)
    stale = store._parts["gone"]  # what such an append found
    store.delete_topic("gone")  # its tombstone is written to the state topic
    written = store._log.write_position
    store._parts["gone"] = stale  # the append resumes with it, after the delete
    with pytest.raises(UnknownTopic):
        append(store, "gone", 1, batch)
    assert store._log.write_position == written  # nothing reached the commitlog


def test_a_read_that_looked_its_partition_up_before_a_delete_says_the_topic_is_gone(store):
    """Reads take no lock; one that found a partition before a delete removed its files must
    answer UnknownTopic, not 'deleted by retention' (which a fetch answers OFFSET_OUT_OF_RANGE,
    making consumers reset their position)."""
    store.create_topic("gone", 1, {})
    append(store, "gone", 0, build_batch([b"v"]))
    stale = store._parts["gone"]
    store.delete_topic("gone")
    store._parts["gone"] = stale
    with pytest.raises(UnknownTopic):
        store.read("gone", 0, 0, 1 << 20)
