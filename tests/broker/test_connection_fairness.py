"""A connection reads and writes without a trip through the scheduler per call while its socket
has bytes (broker/net/socket_io.py), yet a client that pipelines a burst of requests does not
hold up the others: the connection yields every YIELD_EVERY calls."""

import threading
import time

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from tests.kit.wire import WireClient

BURST = 20_000


def _frames(count: int) -> bytes:
    request = ApiVersionsRequest[0]()
    out = bytearray()
    for correlation_id in range(1, count + 1):
        request.with_header(correlation_id=correlation_id, client_id="burst")
        out += request.encode(header=True, framed=True)
    return bytes(out)


def test_another_client_is_answered_while_a_pipelined_burst_is_worked_through(gregor):
    busy, other = WireClient(gregor, timeout=60), WireClient(gregor, timeout=60)
    answered = [0]

    def drain() -> None:
        while answered[0] < BURST:
            if busy.receive_frame() is None:
                return
            answered[0] += 1

    reader = threading.Thread(target=drain, daemon=True)
    writer = threading.Thread(target=busy.send_raw, args=(_frames(BURST),), daemon=True)
    reader.start()
    writer.start()
    deadline = time.monotonic() + 30
    while answered[0] < 200:  # the burst is being answered
        assert time.monotonic() < deadline, "the burst was not answered"
        time.sleep(0.001)
    response = other.request(MetadataRequest[1](topics=[]))
    during = answered[0]
    assert response.brokers, "the other client got no brokers"
    reader.join(60)
    writer.join(60)
    assert answered[0] == BURST
    # without yielding, the busy connection's reader would have answered its whole burst first
    assert during < BURST - 1_000, f"the other client waited for {during} of {BURST} answers of the burst"
