"""The C decoder, protocol/_produce_request.c, and its Python twin in protocol/produce_request.py give the
same result on the same bytes: equal fields, records that are views of the same buffer, or both a
DecodeError (with the same message where the Python walk says more than "truncated"). The bodies that
should not decode are read from the end of a page followed by an inaccessible one: a read past the end
of the buffer is a crash, not a pass."""

import ctypes
import mmap
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import produce_request
from protocol.produce_request import (
    MAX_VERSION,
    MIN_VERSION,
    DecodeError,
    PartitionData,
    ProduceRequestBody,
    TopicData,
)
from tests.protocol.produce_requests import encode, plain

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
c_decode = produce_request._c_decode
py_decode = produce_request._decode
needs_c = pytest.mark.skipif(c_decode is None, reason="protocol/_produce_request.c is not built")

int32 = st.integers(-(2**31), 2**31 - 1)
names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)  # any UTF-8, "" too
acks = st.one_of(st.sampled_from([-1, 0, 1]), st.integers(-(2**15), 2**15 - 1))


def topics(records_size=3000, most_topics=5, most_partitions=20):
    sized = st.builds(lambda n, seed: random.Random(seed).randbytes(n), st.integers(0, records_size), st.integers())
    records = st.one_of(st.none(), st.binary(max_size=records_size), sized)  # binary's are mostly short
    return st.lists(st.tuples(names, st.lists(st.tuples(int32, records), max_size=most_partitions)),
                    max_size=most_topics)


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tagged(fields):
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


def flexible_with_tags(txn, acks, timeout, topics, tags):
    """A v9+ body as kafka-python writes it but with tagged fields: `tags` gives each section's, in order
    (each partition's, each topic's, then the body's)."""
    def compact(data):
        return b"\x00" if data is None else uvarint(len(data) + 1) + data
    out = compact(None if txn is None else txn.encode()) + acks.to_bytes(2, "big", signed=True)
    out += timeout.to_bytes(4, "big", signed=True) + uvarint(len(topics) + 1)
    for name, parts in topics:
        out += compact(name.encode()) + uvarint(len(parts) + 1)
        for index, records in parts:
            out += index.to_bytes(4, "big", signed=True) + compact(records) + tagged(next(tags))
        out += tagged(next(tags))
    return out + tagged(next(tags))


def assert_same(c, py):
    """Field by field, with the same types; records equal bytes, and views of the same object."""
    assert type(c) is type(py) is ProduceRequestBody
    assert (c.transactional_id, c.acks, c.timeout_ms) == (py.transactional_id, py.acks, py.timeout_ms)
    assert type(c.transactional_id) is type(py.transactional_id)
    assert type(c.topic_data) is type(py.topic_data) is list and len(c.topic_data) == len(py.topic_data)
    for ct, pt in zip(c.topic_data, py.topic_data):
        assert type(ct) is type(pt) is TopicData and type(ct.name) is str and ct.name == pt.name
        assert type(ct.partition_data) is list and len(ct.partition_data) == len(pt.partition_data)
        for cp, pp in zip(ct.partition_data, pt.partition_data):
            assert type(cp) is type(pp) is PartitionData and cp.index == pp.index
            assert type(cp.records) is type(pp.records)
            if isinstance(pp.records, memoryview):
                assert cp.records.obj is pp.records.obj
                assert (cp.records.format, cp.records.shape, cp.records.strides, cp.records.readonly,
                        cp.records.c_contiguous) == (pp.records.format, pp.records.shape, pp.records.strides,
                                                     pp.records.readonly, pp.records.c_contiguous)
            if pp.records is not None:
                assert bytes(cp.records) == bytes(pp.records)


def agree(body, version):
    """Both decoders on `body`: the C result when both accept it, None when both refuse it."""
    try:
        py = py_decode(body, version)
    except DecodeError as exc:
        with pytest.raises(DecodeError) as c_exc:
            c_decode(body, version)
        said, c_said = str(exc), str(c_exc.value)
        truncated = f"truncated or malformed ProduceRequest v{version}: "
        if said.startswith(truncated) and "UnicodeDecodeError" not in said:  # struct's or IndexError's words
            assert c_said.startswith(truncated), (said, c_said)
        else:
            assert c_said == said
        return None
    c = c_decode(body, version)
    assert_same(c, py)
    return c


class Edge:
    """Views ending where an inaccessible page starts."""

    def __init__(self, size=1 << 20):
        self.size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        self.map = mmap.mmap(-1, self.size + mmap.PAGESIZE)
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.protect(0)  # PROT_NONE, which the mmap module does not name
        self.view = memoryview(self.map)

    def protect(self, how):
        if self.libc.mprotect(ctypes.c_void_p(self.address + self.size), mmap.PAGESIZE, how) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")

    def __call__(self, data):
        assert len(data) <= self.size
        self.view[self.size - len(data):self.size] = data
        return self.view[self.size - len(data):self.size]


@pytest.fixture(scope="module")
def edge():
    guard = Edge()
    yield guard
    guard.protect(mmap.PROT_READ | mmap.PROT_WRITE)


def test_the_setup_built_the_c_decoder():
    assert c_decode is not None, "protocol/_produce_request.c was not built: bash bin/setup builds it"


@needs_c
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(txn=st.one_of(st.none(), names), acks=acks, timeout=int32, topics=topics())
def test_both_decoders_read_what_kafka_python_encodes(version, txn, acks, timeout, topics):
    wire = encode(version, txn, acks, timeout, topics)
    for body in (wire, bytearray(wire), memoryview(b"header" + wire)[6:], memoryview(bytearray(wire))):
        decoded = agree(body, version)
        assert plain(decoded) == (txn, acks, timeout, topics)
        if isinstance(body, memoryview):
            for t in decoded.topic_data:
                for p in t.partition_data:
                    assert p.records is None or isinstance(p.records, memoryview) and p.records.obj is body.obj


@needs_c
@pytest.mark.parametrize("version", range(9, MAX_VERSION + 1))
@settings(max_examples=15, deadline=None)
@given(txn=st.one_of(st.none(), names), topics=topics(100, 3, 4),
       tags=st.lists(st.lists(st.tuples(st.integers(0, 2**31), st.binary(max_size=200)), max_size=3),
                     min_size=40, max_size=40))
def test_tagged_fields_are_skipped_at_every_level(version, txn, topics, tags):
    body = flexible_with_tags(txn, 1, 500, topics, iter(tags))
    assert plain(agree(body, version)) == (txn, 1, 500, topics)


@needs_c
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=5, deadline=None)
@given(txn=st.one_of(st.none(), names), topics=topics(40, 3, 4))
def test_every_truncation_is_refused_by_both(version, txn, topics, edge):
    wire = encode(version, txn, 1, 100, topics)
    for cut in range(len(wire)):
        assert agree(edge(wire[:cut]), version) is None
    assert plain(agree(edge(wire), version)) == (txn, 1, 100, topics)


@needs_c
@settings(max_examples=10, deadline=None)
@given(txn=st.one_of(st.none(), names), topics=topics(40, 2, 3),
       tags=st.lists(st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=20)), max_size=2),
                     min_size=20, max_size=20))
def test_every_truncation_of_a_body_with_tags_is_refused_by_both(txn, topics, tags, edge):
    wire = flexible_with_tags(txn, 1, 100, topics, iter(tags))
    for cut in range(len(wire)):
        assert agree(edge(wire[:cut]), 9) is None


@needs_c
@pytest.mark.parametrize("version", [3, 8, 9, 11])
@settings(max_examples=150, deadline=None)
@given(garbage=st.binary(max_size=300))
def test_garbage_is_read_alike(version, garbage, edge):
    agree(edge(garbage), version)


@needs_c
@pytest.mark.parametrize("version", [3, 9])
@settings(max_examples=150, deadline=None)
@given(topics=topics(30, 3, 4), changes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                   min_size=1, max_size=4))
def test_a_damaged_body_is_read_alike(version, topics, changes, edge):
    wire = bytearray(encode(version, "tx", 1, 100, topics))
    for at, value in changes:
        wire[at % len(wire)] = value
    agree(edge(bytes(wire)), version)


def v3(txn_length=b"\xff\xff", topics_count=b"\x00\x00\x00\x01", topic=b"\x00\x01t\x00\x00\x00\x00"):
    return txn_length + b"\x00\x01\x00\x00\x00\x64" + topics_count + topic


def v9(txn=b"\x00", topics_count=b"\x02", topic=b"\x02t\x01\x00", tags=b"\x00"):
    return txn + b"\x00\x01\x00\x00\x00\x64" + topics_count + topic + tags


@needs_c
@pytest.mark.parametrize("version,body,accepted", [
    (3, v3(), True),
    (3, v3() + b"trailing", True),
    (3, v3(txn_length=b"\xff\xfe"), True),  # any negative length is a null transactional id
    (3, v3(txn_length=b"\x00\x00"), True),
    (3, v3(topics_count=b"\xff\xff\xff\xff"), False),
    (3, v3(topics_count=b"\x7f\xff\xff\xff"), False),
    (3, v3(topic=b"\xff\xff\x00\x00\x00\x00"), False),  # a null topic name
    (3, v3(topic=b"\x00\x01\xff\x00\x00\x00\x00"), False),  # not UTF-8
    (3, v3(topic=b"\x00\x03\xed\xa0\x80\x00\x00\x00\x00"), False),  # a UTF-8 surrogate
    (3, v3(topic=b"\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x07\xff\xff\xff\xfe"), True),  # null records
    (3, v3(topic=b"\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x07\x00\x00\x00\x05abcd"), False),
    (3, v3(topic=b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x07\x00\x00\x00\x00"), False),
    (9, v9(), True),
    (9, v9(tags=b""), False),  # the body's tagged fields are required
    (9, v9(tags=b"\x01\x05\x02ab"), True),
    (9, v9(tags=b"\x01\x05\x03ab"), False),
    (9, v9(txn=b"\x81\x00"), True),  # a varint longer than needed
    (9, v9(txn=b"\x80\x80\x80\x80\x01"), False),  # 5 bytes: read, too long a string
    (9, v9(txn=b"\x80\x80\x80\x80\x80\x00"), False),  # 6 bytes
    (9, v9(topics_count=b"\x00"), False),  # a null array
    (9, v9(topics_count=b"\xff\xff\xff\xff\x7f"), False),  # 35 bits
    (9, v9(topic=b"\x00\x01\x00"), False),  # a null topic name
    (9, v9(topic=b"\x02\xc3\x01\x00"), False),  # not UTF-8
    (9, v9(topic=b"\x02t\x00\x00"), False),  # a null partitions array
    (9, v9(topic=b"\x02t\x02\x00\x00\x00\x07\x00\x00\x00"), True),  # null records
    (9, v9(topic=b"\x02t\x02\x00\x00\x00\x07\x83\x00ab\x00\x00"), True),  # records' length in 2 bytes
    (9, v9(topic=b"\x02t\x02\x00\x00\x00\x07\x04ab\x00\x00"), False),
    (9, v9(topic=b"\x02t\x02\x00\x00\x00\x07\x01" + b"\x01\x00\x02\x01\x00" + b"\x01\x09\x00"), True),  # tags
    (9, v9(topic=b"\x02t\x02\x00\x00\x00\x07\x01" + b"\x01\x00\x02\x01"), False),
    (9, v9(topic=b"\x02t\x02\x00\x00\x00\x07\x01" + b"\x00" + b"\x01\x09\x01"), False),
    (9, b"", False),
    (3, b"", False),
])
def test_edge_cases_are_read_alike(version, body, accepted, edge):
    assert (agree(edge(body), version) is not None) == accepted


@needs_c
def test_versions_out_of_range_are_refused_alike():
    for version in (0, 2, 12, 2**70, -1):
        with pytest.raises(ValueError, match=f"ProduceRequest v{version} is not decoded here"):
            c_decode(b"", version)
        with pytest.raises(ValueError, match=f"ProduceRequest v{version} is not decoded here"):
            py_decode(b"", version)


@needs_c
def test_a_memoryview_of_other_than_bytes_is_refused():
    wire = encode(9, None, 1, 100, [("t", [(0, b"abcd")])])
    body = memoryview(wire + bytes(-len(wire) % 4)).cast("i")
    with pytest.raises(TypeError):
        c_decode(body, 9)
