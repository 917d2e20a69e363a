"""Offsets for timestamps (Kafka ListOffsets semantics) and the max-timestamp (-3) lookup."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.record_batch import parse_header, stamp_log_append_time
from tests.store.conftest import append, build_batch


@pytest.fixture
def timed(store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"a", b"b", b"c"], timestamps=[100, 300, 200]))  # offsets 0-2
    append(store, "t", 0, build_batch([b"d"], timestamps=[150]))  # 3: not monotonic
    append(store, "t", 0, build_batch([b"e", b"f"], timestamps=[500, 400]))  # 4-5
    return store


@pytest.mark.parametrize(("ts", "expected"), [
    (0, (0, 100)),
    (100, (0, 100)),
    (101, (1, 300)),
    (250, (1, 300)),
    (300, (1, 300)),
    (301, (4, 500)),
    (450, (4, 500)),
    (500, (4, 500)),
    (501, (-1, -1)),
])
def test_offset_for_timestamp_finds_first_record_at_or_after(timed, ts, expected):
    assert timed.offset_for_timestamp("t", 0, ts) == expected


def test_offset_for_timestamp_on_empty_partition_has_no_match(store):
    store.create_topic("t", 1, {})
    assert store.offset_for_timestamp("t", 0, 0) == (-1, -1)
    assert store.max_timestamp_offset("t", 0) == (-1, -1)


def test_max_timestamp_offset_is_the_first_record_with_the_largest_timestamp(timed):
    assert timed.max_timestamp_offset("t", 0) == (4, 500)
    append(timed, "t", 0, build_batch([b"g", b"h"], timestamps=[10, 500]))
    assert timed.max_timestamp_offset("t", 0) == (4, 500)
    append(timed, "t", 0, build_batch([b"i", b"j"], timestamps=[10, 900]))
    assert timed.max_timestamp_offset("t", 0) == (9, 900)


def test_index_follows_appends_after_first_lookup(timed):
    assert timed.offset_for_timestamp("t", 0, 600) == (-1, -1)
    append(timed, "t", 0, build_batch([b"g"], timestamps=[700]))
    assert timed.offset_for_timestamp("t", 0, 600) == (6, 700)


def test_log_append_time_batches_use_the_batch_max_timestamp(store):
    store.create_topic("t", 1, {})
    batch = bytearray(build_batch([b"a", b"b"], timestamps=[1, 2]))
    stamp_log_append_time(batch, 12_345)
    append(store, "t", 0, batch)
    assert store.offset_for_timestamp("t", 0, 5) == (0, 12_345)
    assert store.max_timestamp_offset("t", 0) == (0, 12_345)


def test_compressed_batch_is_searched_inside(store):
    store.create_topic("t", 1, {})
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**30)
    for i, ts in enumerate([10, 20, 30]):
        builder.append(i, timestamp=ts, key=None, value=b"v" * 50, headers=[])
    batch = bytes(builder.build())
    assert parse_header(batch).compression == 1
    append(store, "t", 0, batch)
    assert store.offset_for_timestamp("t", 0, 15) == (1, 20)
    assert store.offset_for_timestamp("t", 0, 5) == (0, 10)
