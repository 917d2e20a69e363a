"""A produced batch's header checks: protocol/_record_batch.c, which the project's setup builds, passes
exactly the batches protocol/record_batch.py's `_validate`, its Python twin, passes, with the same
header; every other batch it leaves to the twin, which says why (None, never a header)."""

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol import record_batch
from protocol.record_batch import HEADER_SIZE, InvalidBatch


def batch(records: int, value: int, producer_id: int, sequence: int, transactional: bool) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=sequence, batch_size=2**30)
    for i in range(records):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"v" * value, headers=[])
    return bytes(builder.build())


batches = st.builds(batch, st.integers(1, 20), st.integers(0, 300), st.sampled_from([-1, 0, 7]),
                    st.sampled_from([-1, 0, 5]), st.booleans())
# a change to one byte: its position (anywhere, or in the header) and its new value
changes = st.one_of(st.none(), st.tuples(st.integers(0, HEADER_SIZE - 1), st.integers(0, 255)),
                    st.tuples(st.integers(0, 10**6), st.integers(0, 255)))


def twin(records, size, max_bytes, check_crc):
    try:
        return record_batch._validate(records, size, max_bytes, check_crc)
    except InvalidBatch:
        return None


def test_the_setup_built_the_c_checks():
    assert record_batch._record_batch is not None, "protocol/_record_batch.c was not built: bash bin/setup builds it"


@settings(max_examples=400, deadline=None)
@given(raw=batches, change=changes, cut=st.integers(0, 3), max_bytes=st.sampled_from([2**20, 100, 61, 2000]),
       check_crc=st.booleans())
def test_c_and_python_checks_agree(raw, change, cut, max_bytes, check_crc):
    data = bytearray(raw)
    if change is not None:
        at, value = change
        data[at % len(data)] = value
    if cut:
        data = data[:len(data) - cut]
    size = len(data)
    records = memoryview(data) if check_crc else bytes(data[:HEADER_SIZE])
    expected = twin(records, size, max_bytes, check_crc)
    got = record_batch._c_header(records, size, max_bytes, check_crc)
    assert got == expected
    if got is not None:
        assert type(got) is record_batch.BatchHeader


@pytest.mark.parametrize("cut", [1, 17, HEADER_SIZE - 1])
def test_a_short_buffer_is_left_to_the_twin(cut):
    raw = batch(3, 10, -1, -1, False)
    assert record_batch._c_header(raw[:cut], cut, 2**20, True) is None
    assert record_batch._c_header(raw[:cut], len(raw), 2**20, False) is None


def test_a_refused_batch_gets_the_twins_error():
    raw = bytearray(batch(3, 10, -1, -1, False))
    raw[-1] ^= 0xFF  # the CRC no longer holds
    with pytest.raises(InvalidBatch, match="CRC"):
        record_batch.validate_produce_records(memoryview(raw), 2**20)


def _set(raw: bytes, at: int, width: int, value: int) -> bytearray:
    """The batch with one field changed and its CRC made to hold again (but where the CRC is the field)."""
    out = bytearray(raw)
    out[at:at + width] = value.to_bytes(width, "big", signed=True)
    if at != 17:
        out[17:21] = crc32c.crc32c(bytes(out[21:])).to_bytes(4, "big")
    return out


GOOD = batch(3, 10, -1, -1, False)


@pytest.mark.parametrize("bad", [
    _set(GOOD, 16, 1, 1),  # magic 1
    _set(GOOD, 16, 1, 3),  # magic 3
    _set(GOOD, 8, 4, len(GOOD) - 11),  # batchLength one more than the bytes
    _set(GOOD, 8, 4, len(GOOD) - 13),  # one less
    _set(GOOD, 0, 8, 1),  # baseOffset 1
    _set(GOOD, 17, 4, 0),  # the CRC
    _set(GOOD, 57, 4, 0),  # no records
    _set(GOOD, 23, 4, 5),  # lastOffsetDelta + 1 != count
    _set(GOOD, 21, 2, 0x20),  # a control batch
    _set(_set(GOOD, 43, 8, 5), 53, 4, -1),  # a producer id without a base sequence
], ids=["magic1", "magic3", "long", "short", "base", "crc", "empty", "delta", "control", "sequence"])
def test_each_check_is_made_in_c(bad):
    assert twin(memoryview(bad), len(bad), 2**20, True) is None  # the twin refuses it
    assert record_batch._c_header(memoryview(bad), len(bad), 2**20, True) is None


def test_a_batch_over_max_message_bytes_is_left_to_the_twin():
    assert record_batch._c_header(GOOD, len(GOOD), len(GOOD) - 1, True) is None
    assert record_batch._c_header(GOOD, len(GOOD), len(GOOD), True) == twin(GOOD, len(GOOD), len(GOOD), True)
