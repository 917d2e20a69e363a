"""The test kit's in-process broker, for tests where no process boundary is under test.

- `running_broker`/`exchange`: a Broker with a real store inside the test's own trio run (the
  clock is whatever trio's is: MockClock in tests), and one request through protocol.codec and
  the handlers both ways, exactly as on the wire, without a socket or a process.
- `InProcessBroker`: the whole broker as `gregor serve` runs it (broker/server.py: store,
  coordinators, a loopback listener for real clients) in a thread of the test process, and
  `MemoryWireClient`s, tests/kit/wire.py's client over an in-memory stream straight into the
  connection loop (broker/net/connection.py), frames and all.
"""

from __future__ import annotations

import gc
import threading
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio
import trio.testing
from kafka.protocol.consumer import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.net.connection import serve_stream
from broker.handlers import dispatch
from broker.server import serve
from protocol.codec import decode_request, encode_response
from store import Store
from tests.kit.gregor import TEST_SEGMENT_BYTES
from tests.kit.wire import WireClient


@asynccontextmanager
async def running_broker(data_dir: Path, **settings: object):
    """A Broker with a real store and a running coordinator, inside the test's trio run."""
    config = BrokerConfig(data_dir=data_dir)
    config.set("commitlog.segment.bytes", TEST_SEGMENT_BYTES)  # small preallocated segments keep tests fast
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


class InProcessBroker:
    """A broker served as `gregor serve` serves it, on a trio loop in a thread of its own; `stop()`
    cancels it as SIGTERM would (the store closes cleanly). `bootstrap` is its loopback listener,
    for real clients; `client()` connects without a socket."""

    def __init__(self, data_dir: Path, admin_port: int | None = None, **settings: str) -> None:
        self.data_dir = data_dir
        self.config = BrokerConfig(data_dir=data_dir, host="127.0.0.1", port=0, admin_port=admin_port)
        self.config.set("commitlog.segment.bytes", TEST_SEGMENT_BYTES)
        for name, value in settings.items():
            self.config.set(name, str(value))
        self.broker: Broker | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._failure: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gregor {data_dir.name}", daemon=True)

    def start(self, timeout: float = 30.0) -> InProcessBroker:
        self._thread.start()
        if not self._ready.wait(timeout) or self.broker is None:
            raise RuntimeError(f"in-process broker not ready: {self._failure!r}")
        # serve() freezes what exists at start-up out of the cyclic GC's reach (a broker process
        # lives as long as that state); here that would be everything the test process holds
        gc.unfreeze()
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    @property
    def admin(self) -> str:
        """"host:port" of the admin HTTP API (admin_port=0 at construction: any free port)."""
        return self.broker.admin_address

    def _run(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    self.broker = await nursery.start(serve, self.config)
                    self.nursery = nursery
                    self._ready.set()
        try:
            trio.run(main)
        except BaseException as exc:  # reported by start() or stop()
            self._failure = exc
        finally:
            self._ready.set()

    def call(self, async_fn, *args):
        """Run `async_fn(*args)` on the broker's loop and return its result."""
        return trio.from_thread.run(async_fn, *args, trio_token=self._token)

    def client(self, timeout: float = 10.0) -> MemoryWireClient:
        return MemoryWireClient(self, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread.is_alive() and self._token is not None:
            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        if self._failure is not None:
            raise RuntimeError("the in-process broker failed") from self._failure

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class MemoryWireClient(WireClient):
    """tests/kit/wire.py's WireClient over a trio memory stream into the in-process broker's
    connection loop on its first listener, as a connection from 127.0.0.1 would be served."""

    def __init__(self, broker: InProcessBroker, timeout: float = 10.0) -> None:
        self.owner, self.timeout, self.correlation_id = broker, timeout, 0
        self.stream, server = trio.testing.memory_stream_pair()
        listener = broker.broker.listeners[0]
        broker.call(self._start, partial(serve_stream, broker.broker, listener, server, "127.0.0.1:0"))

    async def _start(self, serving) -> None:
        self.owner.nursery.start_soon(serving)

    def close(self) -> None:
        try:
            self.owner.call(self.stream.aclose)
        except trio.RunFinishedError:
            pass

    def send_raw(self, payload: bytes) -> None:
        try:
            self.owner.call(self.stream.send_all, payload)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise BrokenPipeError(str(exc)) from None

    def _recv(self, n: int, timeout: float | None = None) -> bytes:
        async def receive() -> bytes | None:
            with trio.move_on_after(self.timeout if timeout is None else timeout):
                try:
                    return await self.stream.receive_some(n)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return b""
            return None
        data = self.owner.call(receive)
        if data is None:
            raise TimeoutError(f"no answer within {self.timeout if timeout is None else timeout} s")
        return data
