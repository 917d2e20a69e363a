"""Stored RecordBatch v2 down-converted to message format v0/v1 for Fetch v0-v3, with plain
bytes. The layouts are the ones a Kafka 3.9 broker sent (tests/broker/test_old_formats.py
compares the two brokers on the wire)."""

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.down_convert import down_convert, magic_for
from protocol.record_batch import stamp_log_append_time
from tests.protocol.message_sets import T0, consumed, read_set

APPENDED = T0 + 99_000


def stored(base_offset: int, count: int, codec_id: int = 0, log_append_time: bool = False) -> bytes:
    """A batch as the store holds it: real base offset, values worth compressing."""
    b = DefaultRecordBatchBuilder(2, codec_id, False, -1, -1, -1, 1 << 30)
    for i in range(count):
        b.append(i, T0 + i, b"k%d" % i, b"v%d" % i * 40, [("h", b"x")])
    batch = bytearray(b.build())
    assert batch[22] & 7 == codec_id
    struct.pack_into(">q", batch, 0, base_offset)
    if log_append_time:
        stamp_log_append_time(batch, APPENDED)
    return bytes(batch)


def test_fetch_versions_read_magic_0_then_1():
    assert [magic_for(v) for v in range(4)] == [0, 0, 1, 1]


@pytest.mark.parametrize("magic", [0, 1])
def test_an_uncompressed_batch_becomes_one_message_per_record_from_the_fetch_offset(magic):
    [converted] = down_convert([stored(10, 3)], magic, 11, 1 << 20)
    messages = read_set(converted)
    assert [(m.offset, m.magic, m.attributes, m.key) for m in messages] == \
        [(11, magic, 0, b"k1"), (12, magic, 0, b"k2")]
    assert all(m.crc_ok for m in messages)
    assert [m.timestamp for m in messages] == ([None, None] if magic == 0 else [T0 + 1, T0 + 2])


@pytest.mark.parametrize("codec_id", [1, 2, 3])
def test_a_compressed_batch_becomes_one_wrapper_of_the_same_codec_with_every_record(codec_id):
    [v1] = down_convert([stored(10, 3, codec_id)], 1, 11, 1 << 20)
    [w] = read_set(v1)
    assert (w.offset, w.attributes, w.timestamp, w.crc_ok) == (12, codec_id, T0 + 2, True)
    assert [(m.offset, m.timestamp, m.attributes) for m in w.inner] == [(0, T0, 0), (1, T0 + 1, 0), (2, T0 + 2, 0)]
    assert [r[0] for r in consumed(v1)] == [10, 11, 12]  # inner offsets count from the first record
    [v0] = down_convert([stored(10, 3, codec_id)], 0, 11, 1 << 20)
    [w] = read_set(v0)
    assert (w.offset, w.magic, w.attributes) == (12, 0, codec_id)
    assert [m.offset for m in w.inner] == [10, 11, 12]  # magic 0: absolute inner offsets
    assert consumed(v0) == [(o, None, b"k%d" % i, b"v%d" % i * 40) for i, o in enumerate([10, 11, 12])]


@pytest.mark.parametrize("codec_id", [0, 1])
def test_log_append_time_batches_stamp_every_magic_1_message(codec_id):
    [v1] = down_convert([stored(0, 2, codec_id, log_append_time=True)], 1, 0, 1 << 20)
    messages = read_set(v1)
    inner = messages[0].inner if codec_id else messages
    assert [(m.attributes, m.timestamp) for m in inner] == [(8, APPENDED)] * 2
    if codec_id:
        assert (messages[0].attributes, messages[0].timestamp) == (codec_id | 8, APPENDED)
    [v0] = down_convert([stored(0, 2, codec_id, log_append_time=True)], 0, 0, 1 << 20)
    assert all(m.attributes & 8 == 0 for m in read_set(v0))  # magic 0 has no timestamp type


def test_a_zstd_batch_stops_the_conversion_and_alone_is_refused():
    plain, zstd = stored(0, 2), stored(2, 2, codec_id=4)
    assert len(down_convert([plain, zstd, stored(4, 1)], 1, 0, 1 << 20)) == 1
    assert down_convert([zstd, plain], 1, 2, 1 << 20) is None


def test_control_batches_are_skipped():
    control = bytearray(stored(0, 1))
    control[22] |= 0x20
    struct.pack_into(">I", control, 17, crc32c.crc32c(bytes(control[21:])))
    assert [m.offset for c in down_convert([bytes(control), stored(1, 1)], 1, 0, 1 << 20) for m in read_set(c)] == [1]


def test_max_bytes_bounds_every_batch_but_the_first():
    batches = [stored(0, 3), stored(3, 3), stored(6, 3)]
    assert len(down_convert(batches, 1, 0, 1)) == 1
    one = len(down_convert(batches[:1], 1, 0, 1 << 20)[0])
    assert len(down_convert(batches, 1, 0, 2 * one)) == 2


def test_a_batch_with_no_record_left_is_not_sent():
    assert down_convert([stored(0, 2)], 1, 5, 1 << 20) == []
