import pytest
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from protocol.api_versions import API_SPECS
from protocol.codec import (
    MalformedRequest,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)


def _wire(request, correlation_id=7, client_id="test"):
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True))


def test_flexible_request_decodes_header_and_body():
    req = decode_request(_wire(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False)))
    assert isinstance(req, Request)
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id) == (3, 12, 7)
    assert req.header.client_id == "test"
    assert req.header.flexible
    assert req.body.topics is None


def test_response_uses_header_v1_for_flexible_versions():
    req = decode_request(_wire(MetadataRequest[12](topics=[], allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False)))
    body = MetadataResponse[12](throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=0, topics=[])
    out = encode_response(req.header, body)
    decoded = MetadataResponse.decode(out, version=12, header=True, framed=True)
    assert decoded.header.correlation_id == 7
    assert decoded.cluster_id == "c"


def test_api_versions_v3_response_keeps_header_v0():
    req = decode_request(_wire(ApiVersionsRequest[3](client_software_name="a", client_software_version="1")))
    assert not req.header.flexible
    out = encode_response(req.header, ApiVersionsResponse[3](error_code=0, api_keys=[], throttle_time_ms=0))
    # size(4) + correlation id(4) + error code(2): no tagged-field byte after the correlation id
    assert out[4:8] == (7).to_bytes(4, "big")
    assert out[8:10] == b"\x00\x00"


def test_api_versions_above_max_answers_v0_with_unsupported_version():
    frame = bytes.fromhex("0012007f00001b59000b6b61666b612d70726f626500")  # recorded by kafka_probe
    req = decode_request(frame)
    assert isinstance(req, UnsupportedRequest)
    out = unsupported_api_versions_response(req.header)
    assert out.hex() == "0000001000001b59002300000001001200000004"


def test_api_versions_above_max_with_v1_header_is_malformed():
    with pytest.raises(MalformedRequest):
        decode_request(bytes.fromhex("0012007f00001b59000b6b61666b612d70726f6265"))


def test_unknown_api_key_is_malformed():
    with pytest.raises(MalformedRequest, match="unknown api key"):
        decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x00")


def test_unsupported_version_of_known_api_is_reported():
    req = decode_request(_wire(DescribeConfigsRequest[0](resources=[])))
    assert isinstance(req, UnsupportedRequest)
    assert req.header.api_version == 0


def test_array_longer_than_the_frame_is_malformed():
    wire = _wire(MetadataRequest[1](topics=[]))
    with pytest.raises(MalformedRequest):
        decode_request(wire[:-4] + (1_000_000).to_bytes(4, "big"))  # as kafka-reference 10_malformed_*


def test_advertised_ranges_contain_the_versions_old_librdkafka_probes():
    must_contain = {0: [0, 3, 7], 1: [4, 10], 2: [1], 10: [0], 8: [2], 9: [1], 11: [0], 12: [0], 13: [0],
                    14: [0], 22: [0]}
    for key, versions in must_contain.items():
        spec = API_SPECS[key]
        for v in versions:
            assert spec.min_version <= v <= spec.max_version, (spec.name, v)
    assert API_SPECS[0].min_version == 0  # KAFKA-18659: librdkafka <= 2.11.0 keeps compression on
