"""Admin calls the cluster security tests send to any node, and the wait they share."""

from __future__ import annotations

import time

from kafka.protocol.metadata import MetadataRequest

from tests.kit.wire import WireClient


def _topic_error(address: str, topic: str) -> int:
    client = WireClient(address)
    try:
        return client.request(MetadataRequest[1](topics=[topic])).topics[0].error_code
    finally:
        client.close()


def _until(read, wanted, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    while (found := read()) != wanted:
        assert time.monotonic() < deadline, f"still {found!r}, not {wanted!r}, after {seconds} s"
        time.sleep(0.05)
