"""Gregor's own readers show committed records only (issue 19): a tag-filtered view ends at the
source's last stable offset and skips batches of aborted transactions, and lookups by key or by
message id never return a transaction marker, a record of an aborted transaction, or one of a
transaction still open."""

from __future__ import annotations

import time

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.views.fetch import read_view
from broker.views.definition import View
from tests.extensions.conftest import TAG, append

FAR_PAST, FAR_FUTURE = 0, 2**62


def txn_batch(pid: int, values: list[bytes], tag: str = "paid") -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=0, base_sequence=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        b.append(i, timestamp=int(time.time() * 1000), key=b"k", value=value, headers=[(TAG, tag.encode())])
    return bytes(b.build())


def _setup(store):
    """Offsets: 0-1 committed (pid 1), 2 its marker, 3-4 aborted (pid 2), 5 its marker, 6 open (pid 3)."""
    store.create_topic("src", 1, {"tag.header": TAG})
    append(store, "src", 0, txn_batch(1, [b"c0", b"c1"]))
    store.append_control("src", 0, 1, 0, commit=True)
    append(store, "src", 0, txn_batch(2, [b"a0", b"a1"]))
    store.append_control("src", 0, 2, 0, commit=False)
    append(store, "src", 0, txn_batch(3, [b"open"]))
    assert (store.last_stable_offset("src", 0), store.high_watermark("src", 0)) == (6, 7)


def _values(batches) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in batches for r in DefaultRecordBatch(bytes(b))
            if not DefaultRecordBatch(bytes(b)).is_control_batch]


def test_a_view_shows_committed_records_only_and_ends_at_the_last_stable_offset(store):
    _setup(store)
    view = View("paid-view", "src", (b"paid",))
    result = read_view(store, view, TAG, 0, 0, 1 << 20)
    assert _values(result.batches) == [(0, b"c0"), (1, b"c1")]
    assert result.high_watermark == 6  # the open transaction's record is not reachable yet
    store.append_control("src", 0, 3, 0, commit=True)
    later = read_view(store, view, TAG, 0, 6, 1 << 20)
    assert _values(later.batches) == [(6, b"open")]


def test_key_and_message_id_lookups_skip_markers_aborted_and_open_records(store):
    _setup(store)
    found = store.lookup_key("src", b"k", FAR_PAST, FAR_FUTURE, wait_s=10)
    assert sorted(r.value for r in found) == [b"c0", b"c1"]
    assert store.lookup_message_id(store.message_id("src", 0, 3)) is None  # aborted
    assert store.lookup_message_id(store.message_id("src", 0, 6)) is None  # open
    assert store.lookup_message_id(store.message_id("src", 0, 0)).value == b"c0"
    store.append_control("src", 0, 3, 0, commit=True)
    assert store.lookup_message_id(store.message_id("src", 0, 6)).value == b"open"  # committed now
