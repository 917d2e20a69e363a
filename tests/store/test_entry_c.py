"""A commitlog entry's framing: store/_entry.c, which the project's setup builds, and store/entry.py's
frame_into, its Python twin, write the same bytes for the same entries, and the entry reads back."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import entry

i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)


def test_the_setup_built_the_c_framing():
    assert entry._entry is not None, "store/_entry.c was not built: bash bin/setup builds it (a C compiler)"
    assert entry.frame is entry._entry.frame_into


@settings(max_examples=300, deadline=None)
@given(batch=st.binary(min_size=61, max_size=3000), topic=st.text(max_size=60), topic_id=st.binary(min_size=16, max_size=16),
       at=st.integers(0, 100), partition=st.integers(0, 2**31 - 1), base=st.integers(0, 2**62), count=st.integers(1, 2**31 - 1),
       store_ts=i64, max_ts=i64, epoch=i32, flags=st.integers(0, 1), kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_c_and_python_framing_agree(batch, topic, topic_id, at, partition, base, count, store_ts, max_ts, epoch, flags,
                                    kind):
    name = topic.encode()
    size = entry.HEADER_SIZE + len(batch) + len(name)
    by_c, by_python = bytearray(b"\xaa" * (at + size + 7)), bytearray(b"\xaa" * (at + size + 7))
    args = (kind(batch), name, topic_id, partition, base, count, store_ts, max_ts, epoch, flags)
    entry._entry.frame_into(memoryview(by_c), at, *args)
    entry.frame_into(memoryview(by_python), at, *args)
    assert by_c == by_python
    read = entry.read_entry(memoryview(by_c), at, 1_000)
    assert (read.position, read.length, read.topic, read.partition, read.base_offset) == (1_000 + at, size, topic,
                                                                                            partition, base)


@pytest.mark.parametrize("at, room", [(0, -1), (5, -1), (5, -100), (-1, 100)])
def test_an_entry_that_does_not_fit_is_refused_and_writes_nothing(at, room):
    batch = bytes(100)
    buffer = bytearray(b"\xaa" * (max(at, 0) + entry.HEADER_SIZE + len(batch) + 1 + room))
    with pytest.raises(ValueError):
        entry._entry.frame_into(memoryview(buffer), at, batch, b"t", bytes(16), 0, 0, 1, 0, 0, 0, 0)
    assert buffer == b"\xaa" * len(buffer)
