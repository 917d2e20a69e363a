"""A client connection's socket reads and writes that go to trio's scheduler only when the kernel
cannot take or give the bytes at once (Kafka's Selector: non-blocking reads and writes, a poll
only when one would block).

trio makes every socket call a checkpoint: a call that succeeds at once still yields to the
scheduler, which then polls epoll before running the task again. Of a small produce request's
75 us on the event loop about 50 went to the connection loop with a handler that did nothing,
most of it two such rounds per request (one receive, one send). Here a call that succeeds goes
on without one; one that would block waits for the socket (a checkpoint, as trio's would);
and after YIELD_EVERY calls in a row that did not wait, the connection yields anyway, so one
busy client cannot keep the event loop from the others and cancellation is seen soon.

Only plain TCP sockets: TLS sessions keep trio's SSLStream. The reader and the sender task of
a connection never write at the same time (broker/net/connection.py's ordering), and only the
reader reads."""

from __future__ import annotations

import os

import trio

IOV_MAX = 1024  # buffers per writev (Linux's limit)
YIELD_EVERY = 16  # calls in a row that need no wait before the connection yields anyway


class SocketIO:
    """Reads and writes on one connected, non-blocking socket (trio's sockets are)."""

    __slots__ = ("fd", "streak")

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.fd = sock.fileno()
        self.streak = 0

    async def _done_at_once(self) -> None:
        self.streak += 1
        if self.streak >= YIELD_EVERY:
            self.streak = 0
            await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int) -> bytes:
        """Up to `max_bytes` bytes; b"" when the peer closed its side."""
        return await self._receive(os.read, max_bytes)

    async def receive_into(self, buffer: memoryview) -> int:
        """Bytes received into `buffer`; 0 when the peer closed its side."""
        return await self._receive(os.readv, (buffer,))

    async def _receive(self, call, arg):
        while True:
            try:
                got = call(self.fd, arg)
            except BlockingIOError:
                self.streak = 0
                await trio.lowlevel.wait_readable(self.fd)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"receiving failed: {exc}") from exc
            await self._done_at_once()
            return got

    async def send(self, response: bytes | bytearray | list) -> None:
        """Write all of `response`: one buffer, or a list of them (a fetch answer: memoryviews over
        the commitlog's mmap, written with scatter-gather writev without a copy in Python)."""
        buffers = response if isinstance(response, list) else [response]
        i = 0
        while i < len(buffers):
            chunk = buffers[i:i + IOV_MAX]
            try:
                sent = os.writev(self.fd, chunk)
            except BlockingIOError:
                self.streak = 0
                await trio.lowlevel.wait_writable(self.fd)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"sending failed: {exc}") from exc
            i = advance(buffers, i, chunk, sent)
        await self._done_at_once()


def advance(buffers: list, i: int, chunk: list, sent: int) -> int:
    """After `sent` bytes of `chunk` (buffers[i:i + len(chunk)]) were written: the index of the
    first buffer not written whole, whose unwritten rest now stands in its place."""
    for buf in chunk:
        if sent < len(buf):
            buffers[i] = memoryview(buf)[sent:]  # partly written: the rest goes next
            break
        sent -= len(buf)
        i += 1
    return i
