"""Hostile or broken input closes (at most) the offending connection; the
broker keeps serving every other client."""

import struct
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from tests.kit.wire import WireClient


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


def test_connections_above_max_connections_per_ip_are_closed(fresh_broker):
    broker = fresh_broker(**{"max.connections.per.ip": "2"})
    first, second = WireClient(broker.bootstrap), WireClient(broker.bootstrap)
    assert first.request(ApiVersionsRequest[0]()).error_code == 0
    assert second.request(ApiVersionsRequest[0]()).error_code == 0
    third = WireClient(broker.bootstrap)
    assert third.closed_by_peer()
    assert "max.connections.per.ip (2) reached" in broker.log()
    first.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the slot frees once the broker sees the close
        fourth = WireClient(broker.bootstrap)
        fourth.send(ApiVersionsRequest[0]())
        if fourth.receive_frame() is not None:
            break
        time.sleep(0.1)
    else:
        pytest.fail("a freed connection slot was never reused")
    assert second.request(ApiVersionsRequest[0]()).error_code == 0


def test_connections_above_max_connections_are_closed(fresh_broker):
    broker = fresh_broker(**{"max.connections": "1"})
    first = WireClient(broker.bootstrap)
    assert first.request(ApiVersionsRequest[0]()).error_code == 0
    assert WireClient(broker.bootstrap).closed_by_peer()
    assert first.request(ApiVersionsRequest[0]()).error_code == 0


def test_idle_connection_is_closed_after_connections_max_idle_ms(fresh_broker):
    broker = fresh_broker(**{"connections.max.idle.ms": "300"})
    idle = WireClient(broker.bootstrap)
    assert idle.request(ApiVersionsRequest[0]()).error_code == 0
    assert idle.closed_by_peer(timeout=5)
    assert _healthy(broker.bootstrap)
