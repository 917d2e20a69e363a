import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.errors import ErrorCode
from protocol.record_batch import InvalidBatch, parse_header, stamp_log_append_time, validate_produce_records


def build(n=3, producer_id=-1, base_sequence=-1, value=b"v", compression=0):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=1000 + i, key=b"k%d" % i, value=value, headers=[])
    return bytes(b.build())


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_valid_batch_returns_its_header():
    header = validate_produce_records(build(5), 1 << 20)
    assert (header.record_count, header.last_offset_delta, header.base_timestamp, header.max_timestamp) == \
        (5, 4, 1000, 1004)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_validate_without_parsing_records(codec):
    header = validate_produce_records(build(10, compression=codec, value=b"abc" * 200), 1 << 20)
    assert header.compression == codec and header.record_count == 10


def test_bad_crc_is_corrupt_message():
    batch = bytearray(build())
    batch[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(bytes(batch), 1 << 20)
    assert err.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_empty_records_is_invalid_record():
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(b"", 1 << 20)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


def test_two_batches_in_one_partition_is_invalid_record():
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(build() + build(), 1 << 20)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


def test_oversized_batch_is_message_too_large():
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(build(1, value=b"x" * 2000), 1000)
    assert err.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_last_offset_delta_mismatch_is_invalid_record():
    batch = bytearray(build(5))
    struct.pack_into(">i", batch, 23, 7)
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(_recrc(batch), 1 << 20)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


def test_nonzero_base_offset_is_invalid_record():
    batch = bytearray(build())
    struct.pack_into(">q", batch, 0, 5)
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(bytes(batch), 1 << 20)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


def test_magic_1_is_invalid_record():
    batch = bytearray(build())
    batch[16] = 1
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(bytes(batch), 1 << 20)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


def test_truncated_batch_is_corrupt_message():
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(build()[:-3], 1 << 20)
    assert err.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_idempotent_batch_without_sequence_is_invalid_record():
    with pytest.raises(InvalidBatch) as err:
        validate_produce_records(build(producer_id=5, base_sequence=-1), 1 << 20)
    assert err.value.error_code == ErrorCode.INVALID_RECORD


def test_log_append_time_stamp_keeps_crc_valid():
    batch = bytearray(build())
    stamp_log_append_time(batch, 123456)
    header = validate_produce_records(bytes(batch), 1 << 20)
    assert header.is_log_append_time and header.max_timestamp == 123456
    assert parse_header(batch).crc == crc32c.crc32c(bytes(batch[21:]))
