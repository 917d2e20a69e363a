"""A connection's large produce batches received into a pipe with splice(2), not into a buffer.

The network half of one copy from socket to page cache (store/piped.py has the store's half; a
follower's shipped chunks take the same way in broker/cluster/shipping.py). RocketMQ's master
copies a request body from Netty's buffer into the mapped commitlog; here the socket's pages are
referenced into the pipe, and the append copies them once, into the page cache. Received into a
buffer and written with pwrite, each byte was copied twice (bench/write_path_probe.py: 0.79 CPU s
per GiB against splice's 0.60).

Once a connection has sent one Produce of `produce.splice.min.bytes` or more, at each frame
boundary it peeks at the next frame. A Produce v3+ of one topic and one partition whose records
are that large (and fit the pipe) is taken apart: its start is read, its records spliced into the
pipe as they arrive, its end read; the request is decoded from those parts with a stand-in for the
records (their first 61 bytes, the batch header), and the handler gets a PipedBatch in their
place. Anything else is read as before, one frame at a time (so the next boundary is seen). A
pipe that fills before the records are in it (the socket's pages came in small pieces) gives its
bytes back and the frame is completed in a buffer: the old way, for that frame.

Only plain TCP connections: a TLS session's bytes must be decrypted in user space.
"""

from __future__ import annotations

import array
import fcntl
import logging
import os
import socket
import termios

import trio

from broker.net.metrics import BrokerMetrics
from broker.net.pipes import open_pipe
from broker.net.receive_timer import ReceiveTimer
from protocol.codec import locate_produce_records
from protocol.produce_request import records_length_field
from protocol.record_batch import HEADER_SIZE as HEAD_BYTES
from store import PipedBatch

log = logging.getLogger("gregor.splice")
PEEK_BYTES = 4096  # a Produce's start (header, ids, one topic's name) and its batch's header fit
MAX_TRAILER = 64  # bytes after the records: tagged fields, none defined in a Produce
EOF_ = object()  # the peer closed its side at a frame boundary


class ProduceSplicer:
    """The pipe, and the frame-boundary peeks, of one plain TCP connection."""

    __slots__ = ("_peeker", "active", "capacity", "fd", "max_frame", "metrics", "min_bytes", "next_size", "read_fd",
                 "write_fd")

    def __init__(self, fd: int, min_bytes: int, max_frame: int, metrics: BrokerMetrics) -> None:
        self.fd = fd
        self.metrics = metrics
        self.min_bytes = min_bytes
        self.max_frame = max_frame
        self.active = False
        self.read_fd = self.write_fd = -1
        self.capacity = 0
        self._peeker: socket.socket | None = None
        self.next_size: int | None = None  # the peeked frame's whole size, when it is read as before

    def consider(self, frame: bytes | bytearray) -> None:
        """Called with each frame received as before: the first Produce this connection could have
        spliced turns peeking on (a client that sends several partitions per request never does)."""
        if not self.active and len(frame) >= self.min_bytes and frame[0] == 0 == frame[1]:
            found = locate_produce_records(bytes(frame[:PEEK_BYTES]))
            if found is not None and found[3] >= self.min_bytes:
                self._open()

    def _open(self) -> None:
        try:
            read_fd, write_fd, capacity = open_pipe()
        except OSError as exc:  # out of descriptors: this connection keeps the buffered way
            log.info("no pipe for splicing produce batches: %s", exc)
            return
        try:  # a second descriptor of the socket, for recv(MSG_PEEK), which os has no call for
            self._peeker = socket.socket(fileno=os.dup(self.fd))
            self._peeker.setblocking(False)
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            log.info("no pipe for splicing produce batches: %s", exc)
            return
        self.read_fd, self.write_fd, self.capacity = read_fd, write_fd, capacity
        self.active = True

    def close(self) -> None:
        if self.active:
            self.active = False
            os.close(self.read_fd)
            os.close(self.write_fd)
            self._peeker.close()  # the duplicate descriptor only: the connection's stays open

    async def receive(self, timer: ReceiveTimer, partial_s: float):
        """At a frame boundary: (the request with a stand-in for its records, its PipedBatch,
        its frame size), or the whole frame (bytes) where its records had to be buffered, or
        None with `next_size` set (or not) to read the next frame as before, or EOF_."""
        self.next_size = None
        peek = await self._peek(timer)
        if not peek:
            return EOF_
        if len(peek) < 4:
            return None
        size = int.from_bytes(peek[:4], "big", signed=True)
        if size < 0 or size > self.max_frame:
            return None  # the decoder refuses it
        self.next_size = 4 + size
        if size < self.min_bytes:
            return None
        found = locate_produce_records(peek[4:])
        if found is None:
            return None
        version, length_at, at, n = found
        trailer = size - at - n
        fits = max(self.min_bytes, HEAD_BYTES) <= n <= self.capacity and 0 <= trailer <= MAX_TRAILER
        if not fits or 4 + at + HEAD_BYTES > len(peek):  # the batch's header must be among the bytes peeked
            return None
        self.next_size = None
        start = os.read(self.fd, 4 + at)  # all peeked: the kernel hands it over whole
        if len(start) != 4 + at:
            raise trio.BrokenResourceError("the socket gave back less than it had shown")
        head = peek[4 + at:4 + at + HEAD_BYTES]
        spilled = await self._records(n, timer, partial_s)
        end = await self._read_exactly(trailer, timer, partial_s)
        await trio.lowlevel.checkpoint()  # calls that did not wait: let the other connections in
        self.metrics.spliced_batches += 1
        if spilled is not None:
            self.metrics.splice_spills += 1
            return bytes(start[4:]) + spilled + end
        request = start[4:4 + length_at] + records_length_field(version, HEAD_BYTES) + head + end
        return request, PipedBatch(self.read_fd, n, head), size

    async def _peek(self, timer: ReceiveTimer) -> bytes:
        while True:
            try:
                return self._peeker.recv(PEEK_BYTES, socket.MSG_PEEK)
            except BlockingIOError:
                await self._wait(timer)
            except OSError as exc:
                raise trio.BrokenResourceError(f"receiving failed: {exc}") from exc

    async def _records(self, n: int, timer: ReceiveTimer, partial_s: float) -> bytes | None:
        """Splice `n` bytes of records from the socket into the pipe; None when they are all
        there, else (the pipe filled first) all of them, out of the pipe and the socket."""
        left = n
        timer.limit = partial_s
        while left:
            moved = await self._within_request(self._splice_in, left, timer)
            if moved is None:  # the pipe is full
                return _drain(self.read_fd, n - left) + await self._read_exactly(left, timer, partial_s)
            left -= moved
        return None

    async def _read_exactly(self, n: int, timer: ReceiveTimer, partial_s: float) -> bytes:
        out = bytearray()
        timer.limit = partial_s
        while len(out) < n:
            out += await self._within_request(self._read, n - len(out), timer)
        return bytes(out)

    def _splice_in(self, n: int) -> int:
        return os.splice(self.fd, self.write_fd, n, flags=os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK)

    def _read(self, n: int) -> bytes:
        return os.read(self.fd, n)

    async def _within_request(self, call, n: int, timer: ReceiveTimer):
        """`call(n)` once the socket has bytes for it (a peer that closes within a request breaks
        the connection); None when the splice into the pipe would block with bytes waiting."""
        while True:
            try:
                got = call(n)
            except BlockingIOError:
                if call == self._splice_in and _readable_bytes(self.fd):
                    return None
                await self._wait(timer)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"receiving failed: {exc}") from exc
            if not got:
                raise trio.BrokenResourceError("the peer closed the connection within a request")
            return got

    async def _wait(self, timer: ReceiveTimer) -> None:
        """Until the socket is readable, the receive timer running (broker/net/receive_timer.py)."""
        timer.waiting_since = trio.current_time()
        await trio.lowlevel.wait_readable(self.fd)
        timer.waiting_since = None


def _readable_bytes(fd: int) -> int:
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return buf[0]


def _drain(fd: int, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        got = os.read(fd, n - len(out))
        if not got:
            raise OSError("the pipe ended early")
        out += got
    return bytes(out)
