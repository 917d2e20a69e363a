"""FetchRequest v4-v18 body decoding: protocol/_fetch_request.c, which the project's setup builds, and
kafka-python's decoder, its twin, give the same fields on the same bodies (kafka-python encodes them);
the C decoder refuses a truncated or garbled body with ValueError, never reading past it."""

import pickle
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest

from protocol import fetch_request
from protocol.fetch_request import (
    MAX_VERSION,
    MIN_VERSION,
    FetchPartition,
    FetchRequestBody,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
    decode_fetch_request,
)

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
KTopic, KForgotten, KState = FetchRequest.FetchTopic, FetchRequest.ForgottenTopic, FetchRequest.ReplicaState
KPartition = KTopic.FetchPartition

int8 = st.integers(-(2**7), 2**7 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)  # any UTF-8, "" too
uuids = st.one_of(st.just(uuid.UUID(int=0)), st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)))
partitions = st.builds(KPartition, partition=int32, current_leader_epoch=int32, fetch_offset=int64,
                       last_fetched_epoch=int32, log_start_offset=int64, partition_max_bytes=int32,
                       replica_directory_id=st.one_of(st.none(), uuids), high_watermark=int64)


def requests(max_topics=5, max_partitions=20):
    """(version, kafka-python FetchRequest) with every field of every version drawn."""
    topics = st.builds(KTopic, topic=names, topic_id=uuids,
                       partitions=st.lists(partitions, max_size=max_partitions))
    forgotten = st.builds(KForgotten, topic=names, topic_id=uuids, partitions=st.lists(int32, max_size=10))
    fields = st.fixed_dictionaries({
        "replica_id": int32, "max_wait_ms": int32, "min_bytes": int32, "max_bytes": int32,
        "isolation_level": int8, "session_id": int32, "session_epoch": int32,
        "topics": st.lists(topics, max_size=max_topics), "forgotten_topics_data": st.lists(forgotten, max_size=3),
        "rack_id": names, "cluster_id": st.one_of(st.none(), names),
        "replica_state": st.one_of(st.none(), st.builds(KState, replica_id=int32, replica_epoch=int64)),
    })
    return st.tuples(st.sampled_from(VERSIONS), fields).map(lambda vf: (vf[0], FetchRequest[vf[0]](**vf[1])))


def assert_same(c, py, path="body"):
    """c (the C decoder's) and py (kafka-python's) have the same values for c's fields, nested too."""
    if isinstance(c, tuple):
        assert isinstance(c, (FetchRequestBody, FetchTopic, FetchPartition, ForgottenTopic, ReplicaState)), path
        assert py is not None, path
        for name in c._fields:
            assert_same(getattr(c, name), getattr(py, name), f"{path}.{name}")
    elif isinstance(c, list):
        assert isinstance(py, list) and len(c) == len(py), path
        for i, (a, b) in enumerate(zip(c, py)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert type(c) is type(py) and c == py, f"{path}: C {c!r}, kafka-python {py!r}"


def test_the_setup_built_the_c_decoder():
    assert fetch_request._c_decode is not None, "protocol/_fetch_request.c was not built: bash bin/setup builds it"


@settings(max_examples=300, deadline=None)
@given(request=requests())
def test_the_c_decoder_and_kafka_python_agree(request):
    version, message = request
    body = message.encode()
    assert_same(fetch_request._c_decode(body, version), FetchRequest[version].decode(body))


@settings(max_examples=40, deadline=None)
@given(request=requests(max_topics=3, max_partitions=3))
def test_any_buffer_and_the_fallback_give_the_same(request):
    version, message = request
    body = message.encode()
    decoded = decode_fetch_request(memoryview(body), version)
    assert type(decoded) is FetchRequestBody
    assert decode_fetch_request(bytearray(body), version) == decoded
    assert decode_fetch_request(memoryview(b"junk" + body + b"tail")[4:], version) == decoded
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fetch_request, "_c_decode", None)
        assert_same(decoded, decode_fetch_request(memoryview(body), version))


def test_a_topic_id_is_a_real_uuid():
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    body = FetchRequest[13](max_wait_ms=1, min_bytes=1, topics=[KTopic(topic_id=u, partitions=[])]).encode()
    got = fetch_request._c_decode(body, 13).topics[0].topic_id
    assert type(got) is uuid.UUID and got == u and hash(got) == hash(u) and str(got) == str(u)
    assert got.bytes == u.bytes and got.is_safe is uuid.SafeUUID.unknown and pickle.loads(pickle.dumps(got)) == u
    zero = FetchRequest[13](max_wait_ms=1, min_bytes=1, topics=[KTopic(topic_id=None, partitions=[])]).encode()
    assert fetch_request._c_decode(zero, 13).topics[0].topic_id is None  # kafka-python's reading of the zero id


@settings(max_examples=60, deadline=None)
@given(request=requests(max_topics=3, max_partitions=3))
def test_every_truncation_is_refused(request):
    version, message = request
    body = message.encode()
    for cut in range(len(body)):
        with pytest.raises(ValueError):
            fetch_request._c_decode(body[:cut], version)


def head(version, count):
    """A body's fields up to the topics array, then that array's count (int32, or uvarint count + 1)."""
    fixed = struct.pack(">iiiib", -1, 500, 1, 2**20, 0)[4 if version >= 15 else 0:]
    if version >= 7:
        fixed += struct.pack(">ii", 0, -1)
    return fixed + (struct.pack(">i", count) if version < 12 else uvarint(count + 1))


def uvarint(n):
    out = b""
    while n >= 0x80:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("count", [2**31 - 1, 2**32 - 2, 1000, -1, -2])
def test_a_count_that_lies_is_refused(version, count):
    if version >= 12 and count < -1 or version < 12 and count >= 2**31:
        return  # not encodable
    with pytest.raises(ValueError):
        fetch_request._c_decode(head(version, count) + bytes(100), version)


@pytest.mark.parametrize("version", [4, 11, 12, 13, 18])
def test_a_partitions_count_that_lies_is_refused(version):
    good = FetchRequest[version](max_wait_ms=1, min_bytes=1, topics=[KTopic(topic="t", partitions=[])]).encode()
    key = 16 if version >= 13 else 2 if version >= 12 else 3  # the topic's id or name, after the topics count
    at = len(head(version, 1)) + key
    for lie in ([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff"] if version < 12 else [b"\xff\xff\xff\xff\x0f", b"\x00"]):
        size = 4 if version < 12 else 1
        with pytest.raises(ValueError):
            fetch_request._c_decode(good[:at] + lie + good[at + size:], version)


def test_malformed_strings_varints_and_versions_are_refused():
    for version, body in [(4, head(4, 1) + b"\x00\x01\xff"), (12, head(12, 1) + b"\x02\xc3")]:  # not UTF-8
        with pytest.raises(ValueError):
            fetch_request._c_decode(body + bytes(40), version)
    with pytest.raises(ValueError, match="varint"):
        fetch_request._c_decode(head(12, 0)[:-1] + b"\x81\x80\x80\x80\x80\x00", 12)
    for version in (3, 19, -1):
        with pytest.raises(ValueError):
            fetch_request._c_decode(FetchRequest[4](max_wait_ms=1, min_bytes=1, topics=[]).encode(), version)


def test_tags_it_does_not_know_are_skipped():
    """Unknown tags in a partition, a topic and the body; the body's ClusterId and ReplicaState too."""
    def tags(*pairs):
        return uvarint(len(pairs)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in pairs)
    partition = struct.pack(">iiqiqi", 3, 7, 100, 6, 0, 1 << 20) + tags((0, bytes(range(16))), (9, b"xyz"))
    topic = bytes(range(1, 17)) + uvarint(2) + partition + tags((5, b""))
    state = struct.pack(">iq", 4, 9) + b"\x00"
    body = (head(17, 1) + topic + uvarint(1) + uvarint(1) + tags((0, uvarint(2) + b"c"), (1, state), (42, b"?")))
    decoded = fetch_request._c_decode(body, 17)
    assert_same(decoded, FetchRequest[17].decode(body))
    assert decoded.cluster_id == "c" and decoded.replica_state == ReplicaState(4, 9)
    assert decoded.topics[0].partitions == [FetchPartition(3, 7, 100, 6, 0, 1 << 20)]


@settings(max_examples=500, deadline=None)
@given(garbage=st.binary(max_size=200), version=st.sampled_from(VERSIONS))
def test_garbage_is_refused_or_decoded_never_read_past(garbage, version):
    try:
        decoded = fetch_request._c_decode(garbage, version)
    except ValueError:
        return
    assert type(decoded) is FetchRequestBody
