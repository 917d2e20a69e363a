"""View filtering inside the broker, on an in-process store: batch re-encoding, gaps, collisions."""

from __future__ import annotations

import numpy as np
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from broker.views.batches import filter_batch
from broker.views.fetch import read_view
from broker.views.definition import View
from store import records as store_records
from tests.extensions.conftest import TAG, append, tagged_batch


def _records(batches) -> list:
    records = MemoryRecords(b"".join(bytes(b) for b in batches))
    out = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        out.extend(batch)
    return out


def _view(tags: str = "paid") -> View:
    return View("v", "src", tuple(t.encode() for t in tags.split(",")))


def test_filtered_batch_keeps_offsets_timestamps_producer_fields_and_a_valid_crc():
    raw = tagged_batch(["paid", "other", "paid", None], first_value=0, timestamp=5_000,
                       producer=(42, 3, 17))
    stored = bytearray(raw)
    stored[0:8] = (100).to_bytes(8, "big")  # the store rewrites baseOffset
    out = filter_batch(memoryview(stored), [0, 1, 2, 3], TAG, {b"paid"})
    batch = DefaultRecordBatch(bytes(out))
    assert batch.validate_crc()
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (100, 103, 104)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 17)
    assert [(r.offset, r.timestamp, r.value) for r in batch] == [(100, 5_000, b"v0"), (102, 5_002, b"v2")]


def test_filtered_batch_keeps_its_compression_codec():
    values = ["paid" if i % 10 == 0 else "other" for i in range(200)]
    out = filter_batch(memoryview(tagged_batch(values, compression=1)), range(200), TAG, {b"paid"})
    batch = DefaultRecordBatch(bytes(out))
    assert batch.compression_type == 1
    assert [r.value for r in batch] == [b"v%d" % i for i in range(0, 200, 10)]


def test_batch_whose_every_record_matches_is_returned_as_stored():
    raw = memoryview(tagged_batch(["paid", "paid"]))
    assert filter_batch(raw, [0, 1], TAG, {b"paid"}) is raw


def test_view_read_returns_only_matching_records_and_an_empty_batch_over_the_unmatched_tail(store):
    store.create_topic("src", 1, {"tag.header": TAG})
    append(store, "src", 0, tagged_batch(["a", "paid", "b"], first_value=0))
    append(store, "src", 0, tagged_batch(["c"] * 50, first_value=3))
    append(store, "src", 0, tagged_batch(["paid", None], first_value=53))
    append(store, "src", 0, tagged_batch(["d"] * 20, first_value=55))
    result = read_view(store, _view(), TAG, 0, 0, 1 << 20)
    records = _records(result.batches)
    assert [(r.offset, r.value) for r in records] == [(1, b"v1"), (53, b"v53")]
    last = DefaultRecordBatch(bytes(result.batches[-1]))
    assert (len(list(last)), last.next_offset) == (0, 75)  # consumers resume at the high watermark
    assert result.high_watermark == 75


def test_view_read_past_every_match_answers_one_empty_batch_up_to_the_high_watermark(store):
    store.create_topic("src", 1, {"tag.header": TAG})
    append(store, "src", 0, tagged_batch(["paid"] + ["x"] * 99))
    result = read_view(store, _view(), TAG, 0, 1, 1 << 20)
    assert result.matched_bytes == 0
    (gap,) = result.batches
    batch = DefaultRecordBatch(bytes(gap))
    assert batch.validate_crc() and (batch.base_offset, batch.next_offset, list(batch)) == (1, 100, [])


def test_a_tag_hash_collision_never_leaks_a_record(store, monkeypatch):
    # Every tag hashes alike: the consume queue cannot tell "paid" from anything else.
    monkeypatch.setattr(store_records, "stable_hash", lambda data: 7)
    assert store_records.tag_hash(b"paid") == store_records.tag_hash(b"evil")
    store.create_topic("src", 1, {"tag.header": TAG})
    append(store, "src", 0, tagged_batch(["evil", "paid", "evil", "also-evil"]))
    append(store, "src", 0, tagged_batch(["evil"] * 5, first_value=4))
    assert set(store.tag_hashes("src", 0, 0, 9).tolist()) == {7}
    records = _records(read_view(store, _view(), TAG, 0, 0, 1 << 20).batches)
    assert [r.value for r in records] == [b"v1"]


def test_non_matching_entries_are_skipped_without_reading_their_batches(store, monkeypatch):
    store.create_topic("src", 1, {"tag.header": TAG})
    for n in range(100):
        append(store, "src", 0, tagged_batch(["paid" if n == 70 else "x"] * 10, first_value=n * 10))
    reads = []
    real_read = store.read
    monkeypatch.setattr(store, "read", lambda *a: reads.append(a) or real_read(*a))
    records = _records(read_view(store, _view(), TAG, 0, 0, 1 << 20).batches)
    assert [r.offset for r in records] == list(range(700, 710))
    assert [a[2] for a in reads] == [700]  # one commitlog read: the matching batch


def test_view_tags_hash_like_the_store():
    assert _view("paid,created").tag_hashes().tolist() == sorted(
        {store_records.tag_hash(b"paid"), store_records.tag_hash(b"created")})
    assert _view().tag_hashes().dtype == np.int64


def test_a_batch_the_log_cleaner_re_encoded_is_filtered_by_offset_delta():
    """The log cleaner keeps a batch's offsets but drops some of its records: the view's
    candidates are offset deltas, which there are not the records' places in the batch."""
    from protocol.rebatch import rebuilt, record_spans, records_area

    raw = tagged_batch(["paid", "other", "paid", "other", "paid"], first_value=0, timestamp=5_000)
    area = records_area(raw, 0)
    spans = list(record_spans(area, 5))
    cleaned = rebuilt(raw, [area[s:e] for s, _, e in (spans[1], spans[2], spans[4])])  # offsets 1, 2, 4 kept
    out = filter_batch(memoryview(cleaned), [2, 4], TAG, {b"paid"})
    assert [(r.offset, r.value) for r in DefaultRecordBatch(bytes(out))] == [(2, b"v2"), (4, b"v4")]
    assert filter_batch(memoryview(cleaned), [3], TAG, {b"paid", b"other"}) is None  # offset 3 is gone
