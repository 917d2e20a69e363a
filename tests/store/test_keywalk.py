"""The key index's per-record walk: store/_keywalk.c, which the project's setup builds, and
store/records.py's walk_keys, the same walk in Python, give the same answer on the same batches;
the C walk refuses a truncated or garbled records area without reading past it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from store import records

keys = st.one_of(st.none(), st.binary(max_size=300))
batches = st.lists(st.tuples(keys, st.integers(0, 20_000), st.integers(0, 2**40)), min_size=1, max_size=200)


def area(items, first_offset_gap=0):
    """The uncompressed records area of a batch of (key, value length, timestamp delta): (bytes, start, count)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**30)
    for i, (key, value_length, ts_delta) in enumerate(items):
        builder.append(i * (1 + first_offset_gap), timestamp=1_000 + ts_delta, key=key, value=b"v" * value_length,
                       headers=[])
    batch = DefaultRecordBatch(bytes(builder.build()))
    batch._maybe_uncompress()
    return batch._buffer, batch._pos, batch.records_count


def test_the_setup_built_the_c_walk():
    assert records._c_walk is not None, "store/_keywalk.c was not built: bash bin/setup builds it (a C compiler)"
    assert records._walk is records._c_walk


@settings(max_examples=150, deadline=None)
@given(items=batches, gap=st.integers(0, 300))
def test_the_c_and_python_walks_agree(items, gap):
    buf, pos, count = area(items, gap)
    expected = [(i * (1 + gap), key) for i, (key, _, _) in enumerate(items) if key is not None]
    assert records.walk_keys(buf, pos, count) == expected
    assert records._c_walk(buf, pos, count) == expected
    assert records._c_walk(memoryview(bytearray(buf)), pos, count) == expected  # any buffer


@settings(max_examples=150, deadline=None)
@given(items=batches, cut=st.integers(0, 10**6))
def test_a_truncated_area_is_refused(items, cut):
    buf, pos, count = area(items)
    cut = pos + cut % (len(buf) - pos)  # somewhere inside the records
    with pytest.raises(ValueError):
        records._c_walk(buf[:cut], pos, count)


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=400), count=st.integers(0, 50))
def test_garbage_is_refused_or_walked_never_read_past(garbage, count):
    try:
        found = records._c_walk(garbage, 0, count)
    except ValueError:
        return
    assert all(isinstance(delta, int) and isinstance(key, bytes) and len(key) <= len(garbage)
               for delta, key in found)
