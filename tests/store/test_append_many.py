"""Store.append_many: a produce request's batches appended in one call, each item answered on
its own (an AppendResult, or the StoreError that refused it without stopping the others)."""

from __future__ import annotations

import pytest

from protocol.record_batch import parse_header
from store import AppendResult, StorageFull, Store, UnknownPartition, UnknownTopic, records
from store.errors import EntryTooLarge
from store.segment import WriteBuffer
from tests.store.conftest import append, build_batch, disk_full, tiny_config


def _item(topic: str, partition: int, batch: bytes) -> tuple:
    return topic, partition, batch, parse_header(batch)


def test_each_batch_goes_to_its_own_partition_with_one_timestamp(store):
    store.create_topic("a", 2, {})
    store.create_topic("b", 1, {"tag.header": "tag"})
    store.create_topic("k", 1, {"key.index.enable": "true"})
    append(store, "a", 1, build_batch([b"before"]))
    batches = [build_batch([b"a0-0", b"a0-1"]),
               build_batch([b"b0"], headers=[[("tag", b"paid")]]),
               build_batch([b"a1"]),
               build_batch([b"k0"], keys=[b"alice"])]
    out = store.append_many([_item("a", 0, batches[0]), _item("b", 0, batches[1]),
                             _item("a", 1, batches[2]), _item("k", 0, batches[3])])
    assert [r.__class__ for r in out] == [AppendResult] * 4
    assert [(r.base_offset, r.last_offset) for r in out] == [(0, 1), (0, 0), (1, 1), (0, 0)]
    assert len({r.log_append_time_ms for r in out}) == 1
    assert [r.end_position for r in out] == sorted(r.end_position for r in out)
    assert (store.high_watermark("a", 0), store.high_watermark("a", 1)) == (2, 2)
    # each partition reads back its own batch, offsets rewritten
    read = store.read("a", 1, 1, 1 << 20).batches
    assert len(read) == 1 and bytes(read[0])[16:] == batches[2][16:]
    assert parse_header(bytes(read[0])).base_offset == 1
    # per-record features of the topics that ask for them still apply
    assert list(store.tag_hashes("b", 0, 0, 1)) == [records.tag_hash(b"paid")]
    assert [h.value for h in store.lookup_key("k", b"alice", 0, 2**62)] == [b"k0"]


def test_a_refused_item_writes_nothing_and_the_others_are_appended(store):
    store.create_topic("t", 2, {})
    small = build_batch([b"v"])
    huge = build_batch([b"x" * 9000])  # larger than tiny_config's 8 KiB commitlog segment
    written = store._log.write_position
    out = store.append_many([_item("t", 0, small), _item("nope", 0, small), _item("t", 7, small),
                             _item("t", 1, huge), _item("t", 1, small)])
    assert [r.__class__ for r in out] == [AppendResult, UnknownTopic, UnknownPartition,
                                          EntryTooLarge, AppendResult]
    assert (out[0].base_offset, out[4].base_offset) == (0, 0)
    assert (store.high_watermark("t", 0), store.high_watermark("t", 1)) == (1, 1)
    entry = out[0].end_position - written  # each small entry's size; nothing else was written
    assert store._log.write_position == written + 2 * entry


def test_storage_full_part_way_through_a_request_keeps_what_was_appended(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 4, {})
    batch = build_batch([b"z" * 1000])
    with disk_full(s):
        out = s.append_many([_item("t", i % 4, batch) for i in range(40)])  # ~40 KiB, 8 KiB segments
    kinds = [r.__class__ for r in out]
    ok = kinds.count(AppendResult)
    assert 0 < ok < 40 and kinds == [AppendResult] * ok + [StorageFull] * (40 - ok)
    assert sum(s.high_watermark("t", p) for p in range(4)) == ok
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert sum(s.high_watermark("t", p) for p in range(4)) == ok
    s.close()


def test_sync_mode_one_flush_handle_covers_the_request(data_dir):
    s = Store.open(data_dir, tiny_config(flush_mode="sync", segment_bytes=1 << 20))
    s.create_topic("t", 3, {})
    before = s.group_commit_stats()
    out = s.append_many([_item("t", p, build_batch([b"v"])) for p in range(3)]
                        + [_item("gone", 0, build_batch([b"v"]))])
    handles = {id(r.flush) for r in out[:3]}
    assert len(handles) == 1 and out[0].flush.wait(10)
    commits, appends = s.group_commit_stats()
    assert commits - before[0] == 1 and appends - before[1] == 3  # the refused item is not counted
    s.close()


def test_appends_are_announced_once_per_appended_partition(store):
    store.create_topic("t", 2, {})
    seen = []
    store.subscribe_appends(seen.extend)
    store.append_many([_item("t", 1, build_batch([b"v"])), _item("x", 0, build_batch([b"v"])),
                       _item("t", 0, build_batch([b"v"]))])
    assert seen == [("t", 1), ("t", 0)]


def test_single_append_raises_what_append_many_returns(store):
    store.create_topic("t", 1, {})
    with pytest.raises(UnknownTopic):
        append(store, "missing", 0, build_batch([b"v"]))
    with pytest.raises(UnknownPartition):
        append(store, "t", 3, build_batch([b"v"]))
    assert append(store, "t", 0, build_batch([b"v"])).base_offset == 0


def test_a_request_is_written_with_one_write_and_read_back_whole(store, monkeypatch):
    """The entries of one call are encoded one after the other and written together; a partition
    listed twice gets consecutive offsets; all of it reads back."""
    store.create_topic("t", 3, {})
    writes = []
    real = WriteBuffer.pwrite
    monkeypatch.setattr(WriteBuffer, "pwrite",
                        lambda self, fd, length, offset: (writes.append(length), real(self, fd, length, offset)))
    items = [_item("t", p % 3, build_batch([b"%d" % p])) for p in range(6)]
    out = store.append_many(items)
    assert len(writes) == 1
    assert [(r.base_offset, r.last_offset) for r in out] == [(0, 0), (0, 0), (0, 0), (1, 1), (1, 1), (1, 1)]
    for p in range(3):
        got = store.read("t", p, 0, 1 << 20).batches
        assert [parse_header(bytes(b)).base_offset for b in got] == [0, 1]
        assert [next(iter(records.decode(bytes(b)))).value for b in got] == [b"%d" % p, b"%d" % (p + 3)]


def test_a_request_larger_than_the_write_buffer_or_a_segment_is_written_in_parts(data_dir):
    s = Store.open(data_dir, tiny_config())  # 8 KiB segments: the request rolls several times
    s.create_topic("t", 4, {})
    out = s.append_many([_item("t", i % 4, build_batch([b"%04d" % i + b"." * 1000])) for i in range(40)])
    assert [r.__class__ for r in out] == [AppendResult] * 40
    for p in range(4):
        got = s.read("t", p, 0, 1 << 20).batches
        assert [next(iter(records.decode(bytes(b)))).value[:4] for b in got] == [b"%04d" % i for i in range(p, 40, 4)]
    s.close()
    s = Store.open(data_dir, tiny_config())  # and recovers the same
    assert [s.high_watermark("t", p) for p in range(4)] == [10] * 4
    s.close()


def test_a_failed_write_acknowledges_none_of_the_deferred_entries(store, monkeypatch):
    store.create_topic("t", 2, {})
    append(store, "t", 0, build_batch([b"before"]))
    written = store._log.write_position

    def failing(self, fd, length, offset):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(WriteBuffer, "pwrite", failing)
    out = store.append_many([_item("t", 0, build_batch([b"a"])), _item("t", 1, build_batch([b"b"]))])
    assert all(isinstance(r, Exception) and not isinstance(r, AppendResult) for r in out)
    assert store._log.write_position == written  # nothing deferred counts as written
    assert (store.high_watermark("t", 0), store.high_watermark("t", 1)) == (1, 0)


def test_an_item_that_raises_leaves_what_a_roll_wrote_before_it_readable(data_dir):
    """Entries written early (a roll writes what was deferred) are derived even when a later item
    raises, so the next append does not reuse their offsets."""
    s = Store.open(data_dir, tiny_config())  # 8 KiB segments
    s.create_topic("t", 1, {})
    s.create_topic("tagged", 1, {"tag.header": "tag"})
    good = build_batch([b"x" * 5000])
    broken = bytearray(build_batch([b"y" * 100], headers=[[("tag", b"a")]]))
    broken[61:] = b"\xff" * (len(broken) - 61)  # the header parses, the records do not
    with pytest.raises(Exception):  # noqa: B017 (whatever the record decoder raises)
        s.append_many([_item("t", 0, good), _item("t", 0, good), _item("tagged", 0, bytes(broken))])
    written = s.high_watermark("t", 0)
    assert written == 1  # the first entry, written when the second rolled the segment
    assert append(s, "t", 0, build_batch([b"after"])).base_offset == written
    assert [parse_header(bytes(b)).base_offset for b in s.read("t", 0, 0, 1 << 20).batches] == list(range(written + 1))
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert s.high_watermark("t", 0) == written + 1
    s.close()
