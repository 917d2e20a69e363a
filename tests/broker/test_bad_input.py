"""Hostile or broken input closes (at most) the offending connection; the
broker keeps serving every other client."""

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from tests.broker.wire import WireClient


def _healthy(bootstrap: str) -> bool:
    client = WireClient(bootstrap)
    try:
        return client.request(ApiVersionsRequest[0]()).error_code == 0
    finally:
        client.close()


@pytest.mark.parametrize("payload", [
    struct.pack(">i", -5) + b"xxxx",                      # negative length prefix
    struct.pack(">i", 2**31 - 1) + b"x" * 100,            # huge length prefix
    struct.pack(">i", 2) + b"\x00\x03",                   # header shorter than 8 bytes
    struct.pack(">i", 10) + b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff",  # unknown api key 999
    struct.pack(">i", 14) + b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00\xde\xad\xbe\xef",  # garbage body
])
def test_malformed_frame_closes_only_that_connection(gregor, payload):
    bystander = WireClient(gregor)
    victim = WireClient(gregor)
    victim.send_raw(payload)
    assert victim.closed_by_peer()
    assert bystander.request(ApiVersionsRequest[0]()).error_code == 0
    assert _healthy(gregor)


def test_truncated_frame_then_eof_leaves_broker_healthy(gregor):
    victim = WireClient(gregor)
    victim.send_raw(struct.pack(">i", 100) + b"\x00\x12\x00")
    victim.close()
    assert _healthy(gregor)


def test_pipelined_requests_are_answered_in_order(gregor):
    client = WireClient(gregor)
    ids = [client.send(ApiVersionsRequest[0]()) for _ in range(5)]
    ids.append(client.send(MetadataRequest[1](topics=[])))
    got = []
    for _ in ids:
        frame = client.receive_frame()
        got.append(struct.unpack(">i", frame[:4])[0])
    assert got == ids


def test_oversized_frame_is_refused_by_socket_request_max_bytes(fresh_broker):
    broker = fresh_broker(**{"socket.request.max.bytes": "1024"})
    victim = WireClient(broker.bootstrap)
    victim.send_raw(struct.pack(">i", 2048) + b"\x00" * 64)
    assert victim.closed_by_peer()
    assert _healthy(broker.bootstrap)


def test_partial_frame_held_open_is_closed_after_request_timeout(fresh_broker):
    broker = fresh_broker(**{"request.timeout.ms": "300"})
    victim = WireClient(broker.bootstrap)
    victim.send_raw(struct.pack(">i", 50) + b"\x00\x12")
    assert victim.closed_by_peer(timeout=5)
