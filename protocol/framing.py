"""Kafka framing, sans-IO: an int32 big-endian size, then the payload.

Bytes go in with `feed()`, whole frames come out of `next_frame()`. A size
that is negative or above `max_frame_bytes` (Kafka's socket.request.max.bytes)
is a protocol error; the decoder never buffers more than one frame's limit.
Never touches a socket.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes


class FrameError(Exception):
    """The peer sent something that is not a Kafka frame; close the connection."""


class FrameDecoder:
    """Consumed bytes are skipped with a read position rather than deleted from the front of
    the buffer, so a large frame is copied once (into the bytes handed out), not once per
    read; the buffer is compacted only when it has been drained."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0  # start of unconsumed bytes in _buf
        self._need: int | None = None  # payload size of the frame being read

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos > (1 << 20) and self._pos * 2 > len(self._buf):
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    @property
    def partial(self) -> bool:
        """True while part of a frame has arrived but not all of it."""
        return self.buffered > 0

    def next_frame(self) -> bytes | None:
        """The next complete frame payload, or None until more bytes arrive."""
        if self._need is None:
            if self.buffered < 4:
                return None
            (size,) = SIZE.unpack_from(self._buf, self._pos)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameError(
                    f"frame of {size} bytes exceeds socket.request.max.bytes {self.max_frame_bytes}")
            self._need = size
        if self.buffered - 4 < self._need:
            return None
        start = self._pos + 4
        end = start + self._need
        with memoryview(self._buf) as view:
            frame = bytes(view[start:end])
        self._pos = end
        self._need = None
        return frame

    def bytes_wanted(self) -> int:
        """How many more bytes the current frame needs (a read-size hint)."""
        if self._need is None:
            return max(4 - self.buffered, 1)
        return 4 + self._need - self.buffered


def frame(payload: bytes | bytearray) -> bytes:
    return SIZE.pack(len(payload)) + payload
