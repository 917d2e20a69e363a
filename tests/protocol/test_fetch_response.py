"""The hand-written FetchResponse encoder must produce kafka-python's bytes, version by version."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from protocol.fetch_response import PartitionResult, encode_fetch_response, error_partition

i64 = st.integers(-1, 2**62)
records = st.one_of(st.none(), st.lists(st.binary(max_size=40), max_size=3))
aborted = st.one_of(st.none(), st.lists(st.tuples(i64, i64), max_size=2))
partition = st.builds(PartitionResult, st.integers(0, 2**31 - 1), st.integers(-1, 120), i64, i64, i64,
                      aborted, st.integers(-1, 5), records)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=30), st.lists(partition, max_size=4)), max_size=3)


def reference(version, topics, throttle, error, session):
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    A = P.AbortedTransaction
    body = FetchResponse[version](throttle_time_ms=throttle, error_code=error, session_id=session, responses=[
        T(topic=name, partitions=[
            P(partition_index=p.partition, error_code=p.error_code, high_watermark=p.high_watermark,
              last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
              aborted_transactions=None if p.aborted_transactions is None else
              [A(producer_id=a, first_offset=b) for a, b in p.aborted_transactions],
              preferred_read_replica=p.preferred_read_replica,
              records=None if p.records is None else b"".join(p.records))
            for p in parts]) for name, parts in topics])
    return bytes(body.encode())


@pytest.mark.parametrize("version", range(13))
@settings(max_examples=60, deadline=None)
@given(topics=topics, throttle=st.integers(0, 10_000), error=st.integers(0, 100),
       session=st.integers(0, 2**31 - 1))
def test_matches_kafka_python_encoder_for_every_version(version, topics, throttle, error, session):
    got = encode_fetch_response(version, topics, throttle, error, session)
    assert b"".join(got) == reference(version, topics, throttle, error, session)


def test_record_batches_are_passed_through_not_copied():
    store = bytearray(b"A" * 100 + b"B" * 50)
    batches = [memoryview(store)[:100], memoryview(store)[100:]]
    out = encode_fetch_response(12, [("t", [PartitionResult(0, 0, 9, 9, 0, None, -1, batches)])])
    assert out[1] is batches[0] and out[2] is batches[1]


def test_error_partition_has_empty_records_and_no_batches():
    out = encode_fetch_response(11, [("t", [error_partition(3, 1)])])
    assert len(out) == 1
    assert b"".join(out) == reference(11, [("t", [error_partition(3, 1)])], 0, 0, 0)


@pytest.mark.parametrize("version", [-1, 13])
def test_versions_outside_the_range_are_refused(version):
    with pytest.raises(ValueError):
        encode_fetch_response(version, [])
