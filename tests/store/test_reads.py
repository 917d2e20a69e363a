"""Reads by offset: whole batches, byte limits (KIP-74), boundaries, segment and queue roll-over."""

from __future__ import annotations

import pytest

from protocol.record_batch import parse_header
from store import OffsetOutOfRange, UnknownPartition, UnknownTopic
from tests.store.conftest import append, build_batch, segment_names


def _offsets(result) -> list[tuple[int, int]]:
    return [(h.base_offset, h.base_offset + h.last_offset_delta) for h in map(parse_header, result.batches)]


@pytest.fixture
def three_batches(store):
    store.create_topic("t", 1, {})
    for values in ([b"a" * 100, b"b" * 100, b"c" * 100], [b"d" * 100], [b"e" * 100, b"f" * 100]):
        append(store, "t", 0, build_batch(values))
    return store


def test_offsets_are_assigned_per_partition(store):
    store.create_topic("t", 2, {})
    r1 = append(store, "t", 0, build_batch([b"a", b"b"]))
    r2 = append(store, "t", 1, build_batch([b"c"]))
    r3 = append(store, "t", 0, build_batch([b"d"]))
    assert [(r.base_offset, r.last_offset) for r in (r1, r2, r3)] == [(0, 1), (0, 0), (2, 2)]
    assert store.high_watermark("t", 0) == 3 and store.high_watermark("t", 1) == 1


def test_read_from_first_offset_returns_all_batches(three_batches):
    assert _offsets(three_batches.read("t", 0, 0, 1 << 20)) == [(0, 2), (3, 3), (4, 5)]


def test_read_from_mid_batch_returns_the_whole_containing_batch(three_batches):
    assert _offsets(three_batches.read("t", 0, 1, 1 << 20)) == [(0, 2), (3, 3), (4, 5)]
    assert _offsets(three_batches.read("t", 0, 5, 1 << 20)) == [(4, 5)]


def test_read_at_high_watermark_is_empty(three_batches):
    result = three_batches.read("t", 0, 6, 1 << 20)
    assert result.batches == [] and result.high_watermark == 6 and result.log_start_offset == 0


def test_read_outside_the_log_raises_offset_out_of_range(three_batches):
    with pytest.raises(OffsetOutOfRange):
        three_batches.read("t", 0, 7, 100)
    with pytest.raises(OffsetOutOfRange):
        three_batches.read("t", 0, -1, 100)


def test_first_batch_is_whole_even_beyond_max_bytes(three_batches):
    assert _offsets(three_batches.read("t", 0, 0, 1)) == [(0, 2)]


def test_read_stops_before_exceeding_max_bytes(three_batches):
    first = len(three_batches.read("t", 0, 0, 1).batches[0])
    second = len(three_batches.read("t", 0, 3, 1).batches[0])
    assert _offsets(three_batches.read("t", 0, 0, first + second)) == [(0, 2), (3, 3)]
    assert _offsets(three_batches.read("t", 0, 0, first + second - 1)) == [(0, 2)]


def test_read_returns_views_without_copying(three_batches):
    view = three_batches.read("t", 0, 0, 1).batches[0]
    assert isinstance(view, memoryview) and not view.readonly


def test_unknown_topic_and_partition_are_distinguished(store):
    store.create_topic("t", 1, {})
    with pytest.raises(UnknownTopic):
        store.read("nope", 0, 0, 1)
    with pytest.raises(UnknownPartition):
        append(store, "t", 5, build_batch([b"x"]))


def test_segment_roll_over_in_the_middle_of_appends(store_any_mode, data_dir):
    store = store_any_mode
    store.create_topic("t", 2, {})
    values = [bytes([i]) * 700 for i in range(40)]
    for i, v in enumerate(values):
        append(store, "t", i % 2, build_batch([v]))
    segments = segment_names(data_dir)
    assert len(segments) >= 4 and all(len(n) == 20 for n in segments)
    assert [int(n) for n in segments] == [i * 8192 for i in range(len(segments))]
    got = []
    for p in (0, 1):
        for view in store.read("t", p, 0, 1 << 30).batches:
            got.append((parse_header(view).base_offset, p, bytes(view[-701:-1])))
    assert sorted((o * 2 + p, v) for o, p, v in got) == list(enumerate(values))


def test_consume_queue_roll_over_mid_batch(store, data_dir):
    store.create_topic("t", 1, {})
    for _ in range(3):
        append(store, "t", 0, build_batch([b"r"] * 7))  # 16 entries per file: batch 3 spans files
    files = sorted(p.name for p in (data_dir / "consumequeue" / "t" / "0").iterdir())
    assert files == [f"{0:020d}", f"{16:020d}"]
    assert _offsets(store.read("t", 0, 15, 1)) == [(14, 20)]
    assert _offsets(store.read("t", 0, 16, 1)) == [(14, 20)]
    assert _offsets(store.read("t", 0, 20, 1)) == [(14, 20)]


def test_entry_larger_than_a_segment_is_refused(store):
    from store import EntryTooLarge
    store.create_topic("t", 1, {})
    with pytest.raises(EntryTooLarge):
        append(store, "t", 0, build_batch([b"x" * 9000]))
    assert store.high_watermark("t", 0) == 0
    append(store, "t", 0, build_batch([b"ok"]))
    assert store.high_watermark("t", 0) == 1


def test_subscribers_hear_each_append(store):
    heard = []
    store.subscribe_appends(heard.extend)
    store.create_topic("t", 2, {})
    append(store, "t", 1, build_batch([b"x"]))
    assert heard == [("t", 1)]
