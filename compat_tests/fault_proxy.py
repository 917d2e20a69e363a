"""A TCP proxy in front of a one-broker cluster that loses Produce responses.

The client bootstraps through the proxy; Metadata answers are rewritten so the broker's
address is the proxy's, and the client keeps coming back through it. The first `drops`
Produce responses are swallowed and the connection closed: the broker has stored the batch,
the client never hears, so it must retry the same batch. Responses come back in request order
per connection, which is how a response is matched to its request's API key.
"""

from __future__ import annotations

import collections
import socket
import struct
import threading
from typing import Self

from kafka.protocol.metadata import MetadataResponse

PRODUCE, METADATA = 0, 3
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exactly(sock, 4)
    return None if head is None else _read_exactly(sock, _SIZE.unpack(head)[0])


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _hang_up(sock: socket.socket) -> None:
    """shutdown() first: a bare close() leaves the peer connected while another thread is in recv()."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class LossyProxy:
    def __init__(self, bootstrap: str, drops: int = 1) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.drops_left = drops
        self.produce_requests = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self._listener.close()
        for sock in self._sockets:
            _hang_up(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            broker = socket.create_connection(self.upstream, timeout=30)
            broker.settimeout(None)
            self._sockets += [client, broker]
            pending: collections.deque = collections.deque()
            threading.Thread(target=self._requests, args=(client, broker, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(client, broker, pending), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket, pending: collections.deque) -> None:
        while (frame := _read_frame(client)) is not None:
            api_key, version, _ = _HEADER.unpack_from(frame)
            pending.append((api_key, version))
            if api_key == PRODUCE:
                with self._lock:
                    self.produce_requests += 1
            try:
                broker.sendall(_SIZE.pack(len(frame)) + frame)
            except OSError:
                break
        _hang_up(broker)

    def _responses(self, client: socket.socket, broker: socket.socket, pending: collections.deque) -> None:
        while (frame := _read_frame(broker)) is not None:
            api_key, version = pending.popleft()
            if api_key == PRODUCE:
                with self._lock:
                    drop = self.drops_left > 0
                    self.drops_left -= drop
                    self.dropped += drop
                if drop:
                    break
            if api_key == METADATA:
                frame = self._rewrite_metadata(frame, version)
            try:
                client.sendall(_SIZE.pack(len(frame)) + frame)
            except OSError:
                break
        _hang_up(client)
        _hang_up(broker)

    def _rewrite_metadata(self, frame: bytes, version: int) -> bytes:
        response = MetadataResponse.decode(frame, version=version, header=True)
        for broker in response.brokers:
            broker.host, broker.port = "127.0.0.1", self.port
        response.with_header(correlation_id=response.header.correlation_id)
        return bytes(response.encode(header=True))
