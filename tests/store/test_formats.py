"""Byte layouts of the on-disk formats: commitlog entries, blank markers, queue entries, msg ids."""

from __future__ import annotations

import struct
import uuid

import crc32c
import numpy as np

from protocol.record_batch import parse_header
from store import entry, msgid
from store.consume_queue import ENTRY_SIZE, QUEUE_ENTRY
from store.segment import segment_name
from tests.store.conftest import append, build_batch


def _segment_bytes(data_dir, start=0) -> bytes:
    return (data_dir / "commitlog" / segment_name(start)).read_bytes()


def test_commitlog_entry_layout_is_self_describing(store_any_mode, data_dir):
    store = store_any_mode
    meta = store.create_topic("orders", 3, {})
    append(store, "orders", 2, build_batch([b"a"]))
    batch = build_batch([b"hello", b"world"], timestamps=[5_000, 7_000])
    result = append(store, "orders", 2, batch)
    raw = _segment_bytes(data_dir)
    state_len = struct.unpack_from(">I", raw, 0)[0]  # the topic's record in the state topic comes first
    first_len = struct.unpack_from(">I", raw, state_len)[0]
    pos = state_len + first_len
    length, crc, magic, flags, tlen = struct.unpack_from(">IIBBH", raw, pos)
    assert (magic, flags, tlen) == (entry.MAGIC_DATA, 0, len(b"orders"))
    assert length == 60 + len(batch) + len(b"orders")
    assert crc == crc32c.crc32c(raw[pos + 8:pos + length])
    topic_id, partition, base, count, store_ts, max_ts = struct.unpack_from(">16siqiqq", raw, pos + 12)
    assert uuid.UUID(bytes=topic_id) == meta.topic_id
    assert (partition, base, count, max_ts) == (2, 1, 2, 7_000)
    assert store_ts == result.log_append_time_ms
    stored = raw[pos + 60:pos + 60 + len(batch)]
    assert struct.unpack_from(">qii", stored, 0) == (1, len(batch) - 12, 0)
    assert stored[16:] == batch[16:]
    assert raw[pos + length - tlen:pos + length] == b"orders"
    assert result.end_position == pos + length


def test_read_entry_rejects_a_flipped_byte():
    view = memoryview(bytearray(4096))
    batch = build_batch([b"payload"])
    length = entry.entry_length(len(batch), 1)
    view[60:60 + len(batch)] = batch
    view[60 + len(batch):length] = b"t"
    entry.ENTRY_HEADER.pack_into(view, 0, length, 0, entry.MAGIC_DATA, 0, 1, bytes(16), 0, 0, 1, 9, 9)
    entry.PREFIX.pack_into(view, 0, length, entry.crc_of(view, 0, length), entry.MAGIC_DATA, 0, 1)
    assert isinstance(entry.read_entry(view, 0, 0), entry.EntryHeader)
    view[100] ^= 0xFF
    assert entry.read_entry(view, 0, 0) == entry.Scan.BAD
    assert entry.read_entry(view, length, 0) == entry.Scan.END


def test_blank_marker_fills_the_rest_of_a_segment():
    view = memoryview(bytearray(1000))
    entry.write_blank(view, 400, 600)
    assert struct.unpack_from(">IIB", view, 400) == (600, 0, entry.MAGIC_BLANK)
    assert entry.read_entry(view, 400, 0) == entry.Scan.BLANK
    assert entry.read_entry(view, 995, 0) == entry.Scan.BLANK  # too small for any entry


def test_consume_queue_entry_is_20_little_endian_bytes(store, data_dir):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"x"]))
    r = append(store, "t", 0, build_batch([b"y", b"z"]))
    assert ENTRY_SIZE == 20 and QUEUE_ENTRY.itemsize == 20
    raw = (data_dir / "consumequeue" / "t" / "0" / f"{0:020d}").read_bytes()
    batch_size = len(build_batch([b"y", b"z"]))
    pos = r.end_position - len(b"t") - batch_size
    assert struct.unpack_from("<qiq", raw, 20) == (pos, batch_size, 0)
    assert struct.unpack_from("<qiq", raw, 40) == (pos, batch_size, 0)
    assert struct.unpack_from("<qiq", raw, 60) == (0, 0, 0)


def test_message_id_round_trips_without_an_index(store):
    store.create_topic("t", 2, {})
    append(store, "t", 1, build_batch([b"a"]))
    append(store, "t", 1, build_batch([b"b", b"c"], keys=[b"k1", b"k2"]))
    mid = store.message_id("t", 1, 2)
    assert len(mid) == 32
    node, position, delta = msgid.decode(mid)
    assert (node, delta) == (0, 1)
    rec = store.lookup_message_id(mid)
    assert (rec.topic, rec.partition, rec.offset, rec.key, rec.value, rec.msg_id) == ("t", 1, 2, b"k2", b"c", mid)
    assert store.lookup_message_id("not-hex") is None
    assert store.lookup_message_id(msgid.encode(0, position + 3, 0)) is None


def test_stored_batch_header_parses_with_assigned_offsets(store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"a", b"b", b"c"]))
    append(store, "t", 0, build_batch([b"d"]))
    view = store.read("t", 0, 3, 1 << 20).batches[0]
    header = parse_header(view)
    assert (header.base_offset, header.partition_leader_epoch, header.record_count) == (3, 0, 1)
    assert np.frombuffer(view, np.uint8).size == header.size
