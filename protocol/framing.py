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
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need: int | None = None  # payload size of the frame being read

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    @property
    def partial(self) -> bool:
        """True while part of a frame has arrived but not all of it."""
        return bool(self._buf)

    def next_frame(self) -> bytes | None:
        """The next complete frame payload, or None until more bytes arrive."""
        if self._need is None:
            if len(self._buf) < 4:
                return None
            (size,) = SIZE.unpack_from(self._buf)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameError(
                    f"frame of {size} bytes exceeds socket.request.max.bytes {self.max_frame_bytes}")
            self._need = size
        if len(self._buf) - 4 < self._need:
            return None
        end = 4 + self._need
        frame = bytes(self._buf[4:end])
        del self._buf[:end]
        self._need = None
        return frame

    def bytes_wanted(self) -> int:
        """How many more bytes the current frame needs (a read-size hint)."""
        if self._need is None:
            return max(4 - len(self._buf), 1)
        return 4 + self._need - len(self._buf)


def frame(payload: bytes | bytearray) -> bytes:
    return SIZE.pack(len(payload)) + payload
