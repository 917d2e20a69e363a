"""The store's reads for the web console (store/lookups.py): records from an offset with their
message ids, past whatever batch the offset falls in, and the batch bytes a partition holds."""

from __future__ import annotations

from store import Store
from tests.store.conftest import append, build_batch


def test_records_from_an_offset_inside_a_batch_carry_their_message_ids(store: Store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"a", b"b", b"c"], keys=[b"k1", b"k2", b"k3"]))
    append(store, "t", 0, build_batch([b"d", b"e"]))
    found = store.records_from("t", 0, 1, limit=3)
    assert [(r.offset, r.value, r.key) for r in found] == [(1, b"b", b"k2"), (2, b"c", b"k3"), (3, b"d", None)]
    assert [r.msg_id for r in found] == [store.message_id("t", 0, o) for o in (1, 2, 3)]
    assert store.lookup_message_id(found[2].msg_id).value == b"d"
    assert store.records_from("t", 0, 5, limit=3) == []


def test_partition_bytes_count_each_batch_once_and_scale_past_the_entries_read(store: Store):
    store.create_topic("t", 1, {})
    sizes = [len(build_batch([b"x" * 100] * 4)) for _ in range(10)]
    for _ in range(10):
        append(store, "t", 0, build_batch([b"x" * 100] * 4))
    assert store.partition_bytes("t", 0) == (sum(sizes), True)
    assert store.partition_bytes("t", 0, most=8) == (sum(sizes), False)  # 2 batches of 4 read, 40 records
    assert store.commitlog_bytes() >= sum(sizes)
