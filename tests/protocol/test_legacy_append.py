"""Message sets of format v0/v1 checked and rebuilt as one RecordBatch v2, with plain bytes.
The error codes are Kafka 3.9's, measured against a real broker in tests/broker/test_old_formats.py."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from protocol.errors import ErrorCode
from protocol.legacy_append import is_legacy, to_record_batch
from protocol.record_batch import InvalidBatch, parse_header, validate_produce_records
from tests.protocol.message_sets import BAD_SETS, RECORDS, T0, compress, message_set, restamped, wrapper

MAX = 1_048_588


def convert(records: bytes, max_bytes: int = MAX, compression_type: str = "producer",
            log_append_time: bool = False, keys_required: bool = False):
    return to_record_batch(records, max_bytes, compression_type, log_append_time, keys_required)


def code_of(records: bytes, **kwargs) -> int:
    with pytest.raises(InvalidBatch) as err:
        convert(records, **kwargs)
    return err.value.error_code


def decoded(batch) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(bytes(batch))]


@pytest.mark.parametrize("codec_id", [0, 1, 2, 3])
def test_magic_0_records_get_no_timestamp(codec_id):
    batch = convert(message_set(0, RECORDS, codec_id))
    assert decoded(batch) == [(i, -1, k, v) for i, (k, v) in enumerate(RECORDS)]
    assert parse_header(batch).compression == codec_id


@pytest.mark.parametrize("codec_id", [0, 1, 2, 3])
def test_magic_1_records_keep_their_timestamps(codec_id):
    batch = convert(message_set(1, RECORDS, codec_id, offsets=[7, 8, 9]))
    assert decoded(batch) == [(i, T0 + i, k, v) for i, (k, v) in enumerate(RECORDS)]


def test_the_rebuilt_batch_passes_the_v2_checks():
    header = validate_produce_records(convert(message_set(1, RECORDS, 1)), MAX)
    assert (header.record_count, header.base_offset, header.producer_id) == (3, 0, -1)


def test_a_wrapper_stamped_log_append_time_gives_its_time_to_its_records():
    inner = message_set(1, RECORDS)
    batch = convert(wrapper(1, 1, compress(1, 1, inner), offset=2, timestamp=T0 - 5000, extra_attributes=8))
    assert [r[1] for r in decoded(batch)] == [T0 - 5000] * 3
    assert not parse_header(batch).is_log_append_time  # stored as CreateTime, as Kafka does


def test_the_topic_compression_type_replaces_the_producers_codec():
    assert parse_header(convert(message_set(1, RECORDS, 1), compression_type="lz4")).compression == 3
    assert parse_header(convert(message_set(1, RECORDS, 0), compression_type="gzip")).compression == 1
    assert parse_header(convert(message_set(1, RECORDS, 2), compression_type="uncompressed")).compression == 0


def test_a_partial_message_at_the_end_is_dropped():
    whole = message_set(1, RECORDS)
    assert len(decoded(convert(whole + whole[:20]))) == 3


@pytest.mark.parametrize("records", [b"", b"\x00" * 8], ids=["empty", "shorter-than-a-header"])
def test_no_complete_message_appends_nothing(records):
    assert convert(records) is None


def test_magic_2_batches_are_not_legacy():
    assert not is_legacy(bytes(16) + b"\x02" + bytes(50))
    assert is_legacy(message_set(0, RECORDS)) and is_legacy(message_set(1, RECORDS)) and is_legacy(b"")


@pytest.mark.parametrize("name", BAD_SETS)
def test_bad_message_sets_get_kafkas_error(name):
    records, code = BAD_SETS[name]
    assert code_of(records) == code


def test_a_message_above_max_message_bytes_is_too_large():
    assert code_of(message_set(1, [(b"k", b"x" * 1200)]), max_bytes=1000) == ErrorCode.MESSAGE_TOO_LARGE


def test_a_magic_0_lz4_frame_with_a_correct_header_checksum_is_read_too():
    inner = message_set(0, RECORDS)
    assert len(decoded(convert(wrapper(0, 3, compress(3, 1, inner))))) == 3


def test_a_log_append_time_topic_refuses_messages_stamped_by_their_producer():
    stamped = restamped(message_set(1, RECORDS[:1]), attributes=8)
    assert code_of(stamped, log_append_time=True) == ErrorCode.INVALID_TIMESTAMP
    assert decoded(convert(stamped))[0][1] == T0  # a CreateTime topic keeps its timestamp


def test_a_compacted_topic_refuses_records_without_a_key():
    assert code_of(message_set(1, RECORDS), keys_required=True) == ErrorCode.INVALID_RECORD
    assert code_of(message_set(1, RECORDS, 1), keys_required=True) == ErrorCode.INVALID_RECORD


def test_a_timestamp_error_wins_over_a_record_error_of_the_same_wrapper():
    inner = message_set(1, RECORDS)
    stamped = wrapper(1, 1, compress(1, 1, inner), timestamp=-1, extra_attributes=8)
    assert code_of(stamped, keys_required=True) == ErrorCode.INVALID_TIMESTAMP


SEEDS = [message_set(m, RECORDS, c) for m in (0, 1) for c in (0, 1, 2, 3)]


@settings(max_examples=400, deadline=None)
@given(seed=st.sampled_from(SEEDS), at=st.integers(0, 400), byte=st.integers(0, 255), cut=st.integers(0, 400),
       tail=st.binary(max_size=20), keys_required=st.booleans())
def test_a_damaged_set_is_refused_with_a_code_or_rebuilt_into_a_valid_batch(seed, at, byte, cut, tail,
                                                                             keys_required):
    damaged = bytearray(seed)
    damaged[at % len(damaged)] = byte
    damaged = bytes(damaged[:len(damaged) - cut % 40]) + tail
    try:
        batch = convert(damaged, keys_required=keys_required)
    except InvalidBatch as err:
        assert err.error_code in ErrorCode.__members__.values()
        return
    if batch is not None:
        validate_produce_records(batch, MAX)
