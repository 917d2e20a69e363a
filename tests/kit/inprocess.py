"""The test kit's in-process broker: a Broker with a real store inside the test's trio run (the clock is whatever trio's is: MockClock in tests), and one request through protocol.codec and the handlers both ways, exactly as on the wire, without a socket or a process."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing
from kafka.protocol.consumer import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.handlers import dispatch
from protocol.codec import decode_request, encode_response
from store import Store


@asynccontextmanager
async def running_broker(data_dir: Path, **settings: object):
    """A Broker with a real store and a running coordinator, inside the test's trio run."""
    config = BrokerConfig(data_dir=data_dir)
    config.set("commitlog.segment.bytes", str(1 << 21))  # small preallocated segments keep tests fast
    for name, value in settings.items():
        config.set(name, str(value))
    store = Store.open(data_dir, config.store_config())
    broker = Broker(config, store, "test-cluster")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(broker.coordinator.run)
            yield broker
            nursery.cancel_scope.cancel()
    finally:
        store.close()


async def exchange(broker: Broker, request, client_id: str = "kafka-probe"):
    """Encode a kafka-python request, handle it, and decode the encoded response."""
    version = request.API_VERSION
    request.with_header(correlation_id=7, client_id=client_id)
    decoded = decode_request(bytes(request.encode(header=True)))
    body = await dispatch(broker, decoded)
    frame = encode_response(decoded.header, body)
    return request.header.get_response_class().decode(frame[4:], version=version, header=True)


def subscription(topics: list[str]) -> bytes:
    return bytes(ConsumerProtocolSubscription(version=0, topics=topics, user_data=None).encode())


def assignment(parts: dict[str, list[int]]) -> bytes:
    A = ConsumerProtocolAssignment
    return bytes(A(version=0, assigned_partitions=[A.TopicPartition(topic=t, partitions=p) for t, p in parts.items()],
                   user_data=None).encode())
