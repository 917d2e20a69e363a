"""All durable state in the commitlog (issue 23, part B): topic metadata, committed offsets
and producer ids are records of the internal state topic; Gregor 1's files are migrated."""

from __future__ import annotations

import struct
import tarfile
import uuid
from pathlib import Path

import pytest

from store import Store, StoreError
from store import state as st
from store.records import decode
from tests.store.conftest import append, build_batch, tiny_config

FIXTURE = Path(__file__).parent / "fixtures" / "gregor1_datadir.tar.gz"
GREGOR1_FILES = ("topics.json", "offsets.log", "producer_ids", "producer_state.json")


def _state_records(store: Store) -> list[tuple[bytes, bytes | None]]:
    q = store._parts[st.STATE_TOPIC][0].queue
    out = []
    for batch in store.read(st.STATE_TOPIC, 0, q.log_start, 1 << 30).batches:
        out.extend((bytes(r.key), None if r.value is None else bytes(r.value)) for r in decode(batch))
    return out


def test_a_topic_is_a_state_record_byte_for_byte(store):
    meta = store.create_topic("orders", 3, {"retention.ms": "1000", "tag.header": "tag"})
    (key, value), = _state_records(store)
    assert key == b"T" + b"orders"
    version, topic_id, partitions, count = struct.unpack_from(">B16siH", value, 0)
    assert (version, uuid.UUID(bytes=topic_id), partitions, count) == (1, meta.topic_id, 3, 2)
    assert value[struct.calcsize(">B16siH"):] == (b"\x00\x0cretention.ms\x00\x041000"
                                                   b"\x00\x0atag.header\x00\x03tag")
    store.delete_topic("orders")
    assert _state_records(store)[-1] == (b"Torders", None)  # a tombstone


def test_an_offset_record_byte_for_byte(store):
    store.offsets.commit("grp", "t", 7, 42, "md", 5)
    (key, value), = _state_records(store)
    assert key == b"O" + b"\x00\x03grp" + b"\x00\x01t" + struct.pack(">i", 7)
    assert value == struct.pack(">Bqii", 1, 42, 5, 2) + b"md"
    assert st.split_offset_key(key) == ("grp", "t", 7)


def test_no_state_files_beside_the_commitlog(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 2, {})
    s.offsets.commit("g", "t", 0, 1)
    s.write_state([(st.PRODUCER_IDS, st.encode_i64(1000))])
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert st.decode_i64(s.state_value(st.PRODUCER_IDS)) == 1000
    s.close()
    assert sorted(p.name for p in data_dir.iterdir()) == [".lock", "checkpoint", "clean_shutdown", "commitlog",
                                                          "consumequeue", "index"]


def test_internal_topic_names_are_reserved_and_hidden(store):
    with pytest.raises(StoreError, match="reserved"):
        store.create_topic("__gregor_state", 1, {})
    with pytest.raises(StoreError, match="reserved"):
        store.create_topic("__gregor_other", 1, {})
    store.create_topic("__consumer_offsets_like", 1, {})  # other names with __ are a user's
    assert st.STATE_TOPIC not in store.topics() and store.topic(st.STATE_TOPIC) is None


@pytest.mark.parametrize("start", ["clean", "crash", "no-checkpoint"])
def test_a_gregor1_data_dir_is_migrated_on_first_start(tmp_path, start):
    """The fixture was written by Gregor 1 (commit ac47a40): topics.json, offsets.log,
    producer_ids and producer_state.json beside a commitlog with data."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(data_dir, filter="data")
    if start != "clean":
        (data_dir / "clean_shutdown").unlink()
    if start == "no-checkpoint":
        (data_dir / "checkpoint").unlink()
    config = tiny_config(segment_bytes=1 << 20)
    s = Store.open(data_dir, config)
    assert not any((data_dir / name).exists() for name in GREGOR1_FILES)
    topics = s.topics()
    assert {n: (m.partitions, m.configs) for n, m in topics.items()} == {
        "orders": (2, {"retention.ms": "86400000"}), "events": (1, {})}
    assert [s.high_watermark("orders", p) for p in (0, 1)] == [3, 2]
    assert s.high_watermark("events", 0) == 2
    assert s.offsets.fetch_group("g1") == {("orders", 0): (3, "meta", 0), ("orders", 1): (2, None, -1)}
    assert "g2" not in s.offsets.groups()  # deleted in Gregor 1
    assert s.offsets.fetch("g3", "events", 0) == (2, "x", 0)
    assert st.decode_i64(s.state_value(st.PRODUCER_IDS)) == 1000
    assert b'"entries"' in s.state_value(st.PRODUCER_SNAPSHOT)
    append(s, "orders", 0, build_batch([b"after"]))
    s.close()
    s = Store.open(data_dir, config)  # and once more, from the records alone
    assert s.topics() == topics and s.high_watermark("orders", 0) == 4
    assert s.offsets.fetch("g3", "events", 0) == (2, "x", 0)
    s.close()


def _ship(leader: Store, follower: Store) -> None:
    """Everything the follower lacks, as a follower pulls it: whole entries, a segment at a time."""
    while follower.log_end_position < leader.log_end_position:
        at, data = leader.read_log(follower.log_end_position, 1 << 20)
        follower.append_replicated(at, data)


def test_a_follower_gets_topics_and_offsets_from_the_shipped_commitlog(tmp_path):
    leader = Store.open(tmp_path / "leader", tiny_config())
    follower = Store.open(tmp_path / "follower", tiny_config())
    meta = leader.create_topic("t", 2, {"tag.header": "tag"})
    append(leader, "t", 1, build_batch([b"a", b"b"]))
    leader.offsets.commit("g", "t", 1, 2)
    leader.alter_topic_configs("t", {})
    _ship(leader, follower)
    assert follower.topics() == {"t": meta.__class__("t", 2, {}, meta.topic_id)}
    assert follower.high_watermark("t", 1) == 2
    assert follower.offsets.fetch("g", "t", 1) == (2, "", -1)
    leader.delete_topic("t")
    _ship(leader, follower)
    assert follower.topics() == {}
    assert not (tmp_path / "follower" / "consumequeue" / "t").exists()
    leader.close()
    follower.close()
