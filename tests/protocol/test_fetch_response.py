"""The hand-written FetchResponse encoder must produce kafka-python's bytes, version by version; its
per-partition loop in C (protocol/_answers.c, built by the project's setup) and in Python
(fetch_response._topics, its twin) the same buffers for the same answers."""

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from protocol import fetch_response
from protocol.fetch_response import NodeEndpoint, PartitionResult, encode_fetch_response, error_partition

i32 = st.integers(-1, 2**31 - 1)
i64 = st.integers(-1, 2**62)
records = st.one_of(st.none(), st.lists(st.binary(max_size=40), max_size=3))
aborted = st.one_of(st.none(), st.lists(st.tuples(i64, i64), max_size=2))
leader = st.one_of(st.none(), st.tuples(i32, i32))
partition = st.builds(PartitionResult, st.integers(0, 2**31 - 1), st.integers(-1, 120), i64, i64, i64,
                      aborted, st.integers(-1, 5), records, leader)
topic_key = st.one_of(st.text(min_size=1, max_size=30), st.uuids())
topics = st.lists(st.tuples(topic_key, st.lists(partition, max_size=4)), max_size=3)
endpoints = st.lists(st.builds(NodeEndpoint, i32, st.text(max_size=20), i32, st.one_of(st.none(), st.text(max_size=9))),
                     max_size=3)


def _for_version(version, topics):
    """Names up to v12, ids from v13 (a name or id of the other kind is swapped for one of its kind);
    no current leader before v12, where the field does not exist."""
    def key(k):
        if version >= 13:
            return k if isinstance(k, uuid.UUID) else uuid.uuid5(uuid.NAMESPACE_DNS, k)
        return k if isinstance(k, str) else str(k)
    return [(key(k), [p if version >= 12 else p._replace(current_leader=None) for p in parts]) for k, parts in topics]


def reference(version, topics, throttle, error, session, nodes=()):
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    A = P.AbortedTransaction
    key = "topic_id" if version >= 13 else "topic"
    extra = {"node_endpoints": [FetchResponse.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                                for n in nodes]} if version >= 16 else {}
    body = FetchResponse[version](throttle_time_ms=throttle, error_code=error, session_id=session, **extra, responses=[
        T(**{key: name}, partitions=[
            P(partition_index=p.partition, error_code=p.error_code, high_watermark=p.high_watermark,
              last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
              aborted_transactions=None if p.aborted_transactions is None else
              [A(producer_id=a, first_offset=b) for a, b in p.aborted_transactions],
              preferred_read_replica=p.preferred_read_replica,
              records=None if p.records is None else b"".join(p.records),
              **({} if p.current_leader is None else {"current_leader": P.LeaderIdAndEpoch(
                  leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])}))
            for p in parts]) for name, parts in topics])
    return bytes(body.encode())


@pytest.mark.parametrize("version", range(19))
@settings(max_examples=60, deadline=None)
@given(topics=topics, throttle=st.integers(0, 10_000), error=st.integers(0, 100),
       session=st.integers(0, 2**31 - 1), nodes=endpoints)
def test_matches_kafka_python_encoder_for_every_version(version, topics, throttle, error, session, nodes):
    topics = _for_version(version, topics)
    nodes = nodes if version >= 16 else []
    got = encode_fetch_response(version, topics, throttle, error, session, nodes)
    assert b"".join(got) == reference(version, topics, throttle, error, session, nodes)
    head, trailer = b"\x00\x01", b"\x02"
    by_c = fetch_response._c_topics(version, head, topics, trailer)
    by_python = fetch_response._topics(version, head, topics, trailer)
    assert [bytes(b) for b in by_c] == [bytes(b) for b in by_python]  # the same buffers, not just the same bytes


def test_the_setup_built_the_c_loop():
    assert fetch_response._c_topics is not None, "protocol/_answers.c was not built: bash bin/setup builds it"
    assert fetch_response._encode_topics is fetch_response._c_topics


@pytest.mark.parametrize("loop", ["c", "python"])
@pytest.mark.parametrize("bad", [
    PartitionResult(2**31, 0, 0, 0, 0, None, -1, []),  # a partition index beyond int32
    PartitionResult(0, 0, 0, 0, 0, None, -1, [1]),  # a batch that is no buffer
    PartitionResult(0, 0, 0, 0, 0, [(1, 2, 3)], -1, []),  # an aborted transaction of three fields
    ("too", "short"),
])
def test_a_malformed_answer_raises_and_never_crashes(loop, bad):
    encode = fetch_response._c_topics if loop == "c" else fetch_response._topics
    with pytest.raises((TypeError, ValueError, OverflowError, struct.error)):
        encode(12, b"", [("t", [bad])], b"\x00")


@pytest.mark.parametrize("loop", ["c", "python"])
def test_record_batches_are_passed_through_not_copied(loop):
    store = bytearray(b"A" * 100 + b"B" * 50)
    batches = [memoryview(store)[:100], memoryview(store)[100:]]
    encode = fetch_response._c_topics if loop == "c" else fetch_response._topics
    out = encode(12, b"", [("t", [PartitionResult(0, 0, 9, 9, 0, None, -1, batches)])], b"\x00")
    assert out[1] is batches[0] and out[2] is batches[1]


def test_error_partition_has_empty_records_and_no_batches():
    out = encode_fetch_response(11, [("t", [error_partition(3, 1)])])
    assert len(out) == 1
    assert b"".join(out) == reference(11, [("t", [error_partition(3, 1)])], 0, 0, 0)


@pytest.mark.parametrize("version", [-1, 19])
def test_versions_outside_the_range_are_refused(version):
    with pytest.raises(ValueError):
        encode_fetch_response(version, [])
