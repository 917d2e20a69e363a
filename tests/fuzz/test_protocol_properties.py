"""Property tests over everything that parses untrusted bytes: the frame
decoder, request decoding for every advertised API and version, and the batch
validator. Each may refuse input only with its own protocol error, and the frame
decoder never buffers past its limit."""

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.api_versions import API_SPECS
from protocol.codec import MalformedRequest, Request, UnsupportedRequest, decode_request
from protocol.framing import FrameDecoder, FrameError
from protocol.record_batch import InvalidBatch, validate_produce_records

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VERSIONS = [(key, v) for key, spec in API_SPECS.items() for v in range(spec.min_version, spec.max_version + 1)]


@SETTINGS
@given(chunks=st.lists(st.binary(max_size=64), max_size=30), limit=st.integers(0, 256))
def test_frame_decoder_only_raises_frame_error_and_respects_its_limit(chunks, limit):
    decoder = FrameDecoder(max_frame_bytes=limit)
    try:
        for chunk in chunks:
            decoder.feed(chunk)
            while (frame := decoder.next_frame()) is not None:
                assert len(frame) <= limit
    except FrameError:
        return


@SETTINGS
@given(frame=st.binary(max_size=512))
def test_arbitrary_bytes_decode_or_raise_malformed(frame):
    try:
        result = decode_request(frame)
    except MalformedRequest:
        return
    assert isinstance(result, (Request, UnsupportedRequest))


@SETTINGS
@given(version_index=st.integers(0, len(VERSIONS) - 1), correlation=st.integers(-2**31, 2**31 - 1),
       body=st.binary(max_size=256), client_id=st.one_of(st.none(), st.text(max_size=20)))
def test_every_advertised_api_and_version_survives_garbage_bodies(version_index, correlation, body, client_id):
    api_key, version = VERSIONS[version_index]
    flexible = API_SPECS[api_key].flexible(version)
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    header = struct.pack(">hhi", api_key, version, correlation) + cid + (b"\x00" if flexible else b"")
    try:
        result = decode_request(header + body)
    except MalformedRequest:
        return
    assert isinstance(result, (Request, UnsupportedRequest))
    assert result.header.correlation_id == correlation


@SETTINGS
@given(data=st.one_of(st.none(), st.binary(max_size=300)), limit=st.integers(0, 400))
def test_batch_validator_only_raises_invalid_batch(data, limit):
    try:
        header = validate_produce_records(data, limit)
    except InvalidBatch as exc:
        assert exc.error_code in (2, 10, 35, 87)
        return
    assert header.magic == 2 and header.record_count > 0 and header.size <= limit


@SETTINGS
@given(flips=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 255)), min_size=1, max_size=4))
def test_bit_flipped_valid_batch_is_refused_or_still_consistent(flips):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=1000 + i, key=b"k", value=b"value-%d" % i, headers=[])
    batch = bytearray(b.build())
    for pos, xor in flips:
        batch[pos % len(batch)] ^= xor
    try:
        header = validate_produce_records(bytes(batch), 1 << 20)
    except InvalidBatch:
        return
    # Only bytes outside the CRC (baseOffset's high bytes are checked, leader epoch is not) may change.
    assert header.record_count == 3
