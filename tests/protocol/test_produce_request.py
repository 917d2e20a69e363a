"""The hand-written ProduceRequest decoder must read what kafka-python's encoder writes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest

from protocol.codec import decode_request, locate_produce_records
from protocol.produce_request import DecodeError, decode_produce_request, records_length_field
from tests.protocol.produce_requests import encode, plain

records = st.one_of(st.none(), st.binary(max_size=200))
topics = st.lists(st.tuples(st.text(min_size=1, max_size=40),
                            st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), records), max_size=4)),
                  max_size=4)


@pytest.mark.parametrize("version", range(3, 12))
@settings(max_examples=60, deadline=None)
@given(txn=st.one_of(st.none(), st.text(max_size=20)), acks=st.sampled_from([-1, 0, 1, 7]),
       timeout=st.integers(-2**31, 2**31 - 1), topics=topics)
def test_decodes_what_kafka_python_encodes(version, txn, acks, timeout, topics):
    body = decode_produce_request(memoryview(encode(version, txn, acks, timeout, topics)), version)
    assert plain(body) == (txn, acks, timeout, topics)


def test_records_are_views_of_the_frame_not_copies():
    frame = bytearray(encode(9, None, 1, 100, [("t", [(0, b"batch-bytes")])]))
    body = decode_produce_request(memoryview(frame), 9)
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame


@pytest.mark.parametrize("version", [3, 9, 11])
@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, 10_000), topics=topics)
def test_every_truncation_is_a_decode_error(version, cut, topics):
    wire = encode(version, "tx", 1, 100, topics)
    cut = cut % len(wire)
    try:
        decode_produce_request(memoryview(wire[:cut]), version)
    except DecodeError:
        pass  # the only exception allowed


def test_an_array_count_larger_than_the_bytes_left_is_refused_before_allocating():
    wire = bytearray(encode(3, None, 1, 100, []))
    wire[-4:] = (2**31 - 1).to_bytes(4, "big")  # topics array count
    with pytest.raises(DecodeError, match="array of"):
        decode_produce_request(memoryview(bytes(wire)), 3)


def framed_request(version, txn, topics, client_id="splice-test"):
    """A whole request (header and body) as a client frames it, without the size prefix."""
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest[version](transactional_id=txn, acks=1, timeout_ms=100, topic_data=[
        T(name=name, partition_data=[P(index=i, records=r) for i, r in parts]) for name, parts in topics])
    req.with_header(correlation_id=5, client_id=client_id)
    return bytes(req.encode(header=True))


@pytest.mark.parametrize("version", range(3, 12))
@settings(max_examples=40, deadline=None)
@given(txn=st.one_of(st.none(), st.text(max_size=20)), name=st.text(min_size=1, max_size=40),
       index=st.integers(0, 2**31 - 1), size=st.sampled_from([1, 127, 128, 70_000, 300_000]))
def test_the_records_of_a_one_partition_request_are_located(version, txn, name, index, size):
    records = bytes(range(256)) * (size // 256) + b"r" * (size % 256)
    payload = framed_request(version, txn, [(name, [(index, records)])])
    found = locate_produce_records(payload)
    assert found is not None
    got_version, length_at, at, n = found
    assert (got_version, n, payload[at:at + n]) == (version, size, records)
    assert payload[length_at:at] == records_length_field(version, size)
    # the request with a stand-in for the records decodes as the original but for them
    stand_in = payload[:length_at] + records_length_field(version, 3) + b"abc" + payload[at + n:]
    decoded = decode_request(stand_in)
    assert plain(decoded.body) == (txn, 1, 100, [(name, [(index, b"abc")])])


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_requests_of_other_shapes_are_not_located(version):
    assert locate_produce_records(framed_request(version, None, [("a", [(0, b"x"), (1, b"y")])])) is None
    assert locate_produce_records(framed_request(version, None, [("a", [(0, b"x")]), ("b", [(0, b"y")])])) is None
    assert locate_produce_records(framed_request(version, None, [("a", [(0, None)])])) is None
    assert locate_produce_records(framed_request(version, None, [])) is None
    whole = framed_request(version, "tx", [("a", [(0, b"z" * 500)])])
    _, _, at, _ = locate_produce_records(whole)
    for cut in range(at):  # the start of the request only, ending before the records
        assert locate_produce_records(whole[:cut]) is None


def test_other_requests_are_not_located():
    from kafka.protocol.metadata import MetadataRequest
    req = MetadataRequest[1](topics=[])
    req.with_header(correlation_id=1, client_id="x")
    assert locate_produce_records(bytes(req.encode(header=True))) is None
    assert locate_produce_records(framed_request(2, None, [("a", [(0, b"x")])])) is None  # v0-v2: message sets
