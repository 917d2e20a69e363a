"""Tag hashes in consume queues and the key index (lookups, time ranges, collisions)."""

from __future__ import annotations

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from store import records
from tests.store.conftest import append, build_batch


def test_tag_hashes_only_for_topics_with_tag_header(store):
    store.create_topic("tagged", 1, {"tag.header": "tag"})
    store.create_topic("plain", 1, {})
    headers = [[("tag", b"paid")], [], [("other", b"x"), ("tag", b"created")]]
    batch = build_batch([b"a", b"b", b"c"], headers=headers)
    append(store, "tagged", 0, batch)
    append(store, "plain", 0, batch)
    tags = store.tag_hashes("tagged", 0, 0, 3)
    assert list(tags) == [records.tag_hash(b"paid"), 0, records.tag_hash(b"created")]
    assert tags.dtype == np.int64 and 0 not in (tags[0], tags[2])
    assert list(store.tag_hashes("plain", 0, 0, 3)) == [0, 0, 0]


def test_tag_hash_is_stable_blake2b_prefix():
    import hashlib
    expected = int.from_bytes(hashlib.blake2b(b"paid", digest_size=8).digest(), "little", signed=True)
    assert records.tag_hash(b"paid") == expected
    assert records.tag_hash(None) == 0


def test_tags_survive_queue_file_roll_over(store):
    store.create_topic("t", 1, {"tag.header": "tag"})
    for i in range(5):
        values = [b"v"] * 5
        append(store, "t", 0, build_batch(values, headers=[[("tag", str(i * 5 + j).encode())]
                                                          for j in range(5)]))
    assert list(store.tag_hashes("t", 0, 10, 25)) == [records.tag_hash(str(i).encode()) for i in range(10, 25)]


def _keyed(store, topic="k"):
    store.create_topic(topic, 2, {"key.index.enable": "true"})
    append(store, topic, 0, build_batch([b"v1", b"v2"], keys=[b"alice", b"bob"]))
    append(store, topic, 1, build_batch([b"v3"], keys=[b"alice"]))
    append(store, topic, 0, build_batch([b"v4", b"v5"], keys=[None, b"carol"]))


def test_lookup_key_finds_every_record_with_the_key(store):
    _keyed(store)
    hits = store.lookup_key("k", b"alice", 0, 2**62)
    assert sorted((h.partition, h.offset, h.value) for h in hits) == [(0, 0, b"v1"), (1, 0, b"v3")]
    assert [h.value for h in store.lookup_key("k", b"carol", 0, 2**62)] == [b"v5"]
    assert store.lookup_key("k", b"nobody", 0, 2**62) == []
    assert all(store.lookup_message_id(h.msg_id) == h for h in hits)


def test_lookup_key_respects_time_range_and_max_hits(store):
    _keyed(store)
    assert store.lookup_key("k", b"alice", 0, 1) == []
    assert len(store.lookup_key("k", b"alice", 0, 2**62, max_hits=1)) == 1


def test_lookup_key_checks_real_key_on_hash_collision(store, monkeypatch):
    store._keys.use_worker = False  # the patched hash must be the one the index is built with
    monkeypatch.setattr(records, "key_hash", lambda topic, key: 42)
    _keyed(store)
    assert [h.value for h in store.lookup_key("k", b"bob", 0, 2**62)] == [b"v2"]
    assert sorted(h.value for h in store.lookup_key("k", b"alice", 0, 2**62)) == [b"v1", b"v3"]


def test_keys_are_indexed_unless_key_index_enable_is_false(store):
    store.create_topic("on", 1, {"key.index.enable": "true"})
    store.create_topic("default", 1, {})  # on by default, as RocketMQ's messageIndexEnable
    store.create_topic("off", 1, {"key.index.enable": "false"})
    for topic in ("on", "default", "off"):
        append(store, topic, 0, build_batch([b"v"], keys=[b"alice"]))
    assert [h.offset for h in store.lookup_key("on", b"alice", 0, 2**62)] == [0]
    assert [h.offset for h in store.lookup_key("default", b"alice", 0, 2**62)] == [0]
    assert store.lookup_key("off", b"alice", 0, 2**62) == []
    assert store.key_index_behind() == 0


def test_keys_are_indexed_off_the_write_path_and_a_lookup_says_how_far_behind(store):
    """The append path never touches the key index: the dispatcher thread does, after it. With
    the dispatcher stopped, a lookup answers what is indexed and key_index_behind() the rest."""
    store.create_topic("k", 1, {"key.index.enable": "true"})
    append(store, "k", 0, build_batch([b"v"], keys=[b"early"]))
    assert [h.offset for h in store.lookup_key("k", b"early", 0, 2**62)] == [0]
    store._keys.stop()
    append(store, "k", 0, build_batch([b"v"], keys=[b"late"]))
    assert store.lookup_key("k", b"late", 0, 2**62, wait_s=0.05) == []
    assert store.key_index_behind() > 0
    store._keys.start()
    assert [h.offset for h in store.lookup_key("k", b"late", 0, 2**62)] == [1]
    assert store.key_index_behind() == 0


def test_key_index_rolls_to_new_file_when_full(store, data_dir):
    store.create_topic("k", 1, {"key.index.enable": "true"})
    for i in range(100):  # 64 entries per file in tests
        append(store, "k", 0, build_batch([b"v"], keys=[f"key{i}".encode()]))
    assert [h.offset for h in store.lookup_key("k", b"key3", 0, 2**62)] == [3]  # waits for the dispatcher
    assert len(list((data_dir / "index").iterdir())) == 2
    assert [h.offset for h in store.lookup_key("k", b"key99", 0, 2**62)] == [99]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_the_key_walker_reads_the_same_keys_as_kafka_pythons_decoder(codec):
    """records.record_keys walks records only up to their keys; it must agree with a full decode
    for every codec and for keys, null keys, empty keys and long (multi-byte varint) lengths."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**30)
    keys = [b"a", None, b"", b"k" * 300, None, b"\x00\xff" * 70_000]
    for i, key in enumerate(keys):
        builder.append(i, timestamp=1_000 + i * 100_000, key=key, value=b"v" * (i * 200),
                       headers=[("h", b"x" * i)])
    batch = bytes(builder.build())
    assert records.record_keys(batch) == records.keyed_records(batch)
    assert [k for _, k in records.record_keys(batch)] == [k for k in keys if k is not None]


def test_the_key_walker_reads_multi_byte_varints_and_long_runs_of_keyless_records():
    """Offset deltas past 63 and timestamp deltas of several bytes (varints of 2 to 5 bytes),
    records of 1 to 3-byte lengths, a key now and then among null ones: records.record_keys's walk
    agrees with a full decode."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**30)
    expected = []
    for i in range(20_000):
        key = b"key-%d" % i if i % 997 == 0 or i in (63, 64, 8191, 8192) else None
        builder.append(i, timestamp=1_000 + i * 7_919 * (1 + i % 3), key=key, value=b"v" * (i % 10 * 1_000),
                       headers=[])
        if key is not None:
            expected.append((i, key))
    batch = bytes(builder.build())
    assert records.record_keys(batch) == records.keyed_records(batch) == expected
