"""The hand-written ProduceRequest decoder must read what kafka-python's encoder writes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest

from protocol.produce_request import DecodeError, decode_produce_request

records = st.one_of(st.none(), st.binary(max_size=200))
topics = st.lists(st.tuples(st.text(min_size=1, max_size=40),
                            st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), records), max_size=4)),
                  max_size=4)


def encode(version, txn, acks, timeout, topics):
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest[version](transactional_id=txn, acks=acks, timeout_ms=timeout, topic_data=[
        T(name=name, partition_data=[P(index=i, records=r) for i, r in parts]) for name, parts in topics])
    return bytes(req.encode())


def plain(body):
    return (body.transactional_id, body.acks, body.timeout_ms,
            [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
             for t in body.topic_data])


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
