"""Kafka framing, sans-IO: an int32 big-endian size, then the payload.

Bytes go in with `feed()`, whole frames come out of `next_frame()`. The rest of a large frame
may instead be received by the caller straight into the frame's own buffer (`whole_frame_buffer`,
then `received`). A size that is negative or above `max_frame_bytes` (Kafka's
socket.request.max.bytes) is a protocol error; the decoder never buffers more than one frame's
limit. Never touches a socket.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
# A frame at least this large, not yet all here, gets a buffer of its own that the rest of it is
# received into, and that buffer is the frame handed out: Python copies none of its bytes.
WHOLE_FRAME_BYTES = 64 * 1024
# That buffer grows with what arrives (doubling, from this), never to the announced size at once:
# a peer that announces a large frame and sends little of it holds at most twice what it sent.
WHOLE_FRAME_STEP = 1024 * 1024


class FrameError(Exception):
    """The peer sent something that is not a Kafka frame; close the connection."""


class FrameDecoder:
    """Consumed bytes are skipped with a read position rather than deleted from the front of
    the buffer; the buffer is compacted only when it has been drained. A small frame is handed
    out as a copy (bytes). A large one (WHOLE_FRAME_BYTES) is collected in a bytearray of its
    own that grows to the frame's size as its bytes arrive, fed or received into
    (`whole_frame_buffer`), and handed out as that bytearray, which the decoder never touches
    again."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0  # start of unconsumed bytes in _buf
        self._need: int | None = None  # payload size of the frame being read
        self._whole: bytearray | None = None  # a large frame's own buffer, while it fills
        self._filled = 0  # bytes of _whole received (its length may be more: room to receive into)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        whole = self._whole
        if whole is not None:
            take = min(len(data), self._need - self._filled)
            self._grow(self._filled + take)
            with memoryview(data) as view:
                whole[self._filled:self._filled + take] = view[:take]
                self._filled += take
                if take < len(view):
                    self._append(view[take:])
            return
        self._append(data)

    def _grow(self, at_least: int) -> None:
        """Make the large frame's buffer at least `at_least` long (at most the frame's size)."""
        whole = self._whole
        if len(whole) < at_least:
            size = min(self._need, max(at_least, 2 * len(whole), WHOLE_FRAME_STEP))
            whole += bytes(size - len(whole))

    def _append(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos > (1 << 20) and self._pos * 2 > len(self._buf):
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    def whole_frame_buffer(self) -> memoryview | None:
        """Where the rest of a large frame may be received (then `received()` with the count), or
        None: receive and `feed()`. Release the view (a `with` block) before the next call."""
        whole = self._whole
        if whole is None:
            return None
        if self._filled == len(whole):
            self._grow(self._filled + 1)
        return memoryview(whole)[self._filled:]

    def received(self, n: int) -> None:
        """`n` bytes were written at the start of the last `whole_frame_buffer()`."""
        self._filled += n

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos + (self._filled if self._whole is not None else 0)

    @property
    def partial(self) -> bool:
        """True while part of a frame has arrived but not all of it."""
        return self.buffered > 0

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame payload, or None until more bytes arrive."""
        whole = self._whole
        if whole is not None:
            if self._filled < self._need:
                return None
            self._whole = None
            self._need = None
            return whole
        if self._need is None:
            if len(self._buf) - self._pos < 4:
                return None
            (size,) = SIZE.unpack_from(self._buf, self._pos)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameError(
                    f"frame of {size} bytes exceeds socket.request.max.bytes {self.max_frame_bytes}")
            self._need = size
        start = self._pos + 4
        end = start + self._need
        if end > len(self._buf):
            if self._need >= WHOLE_FRAME_BYTES:  # the rest goes straight into the frame's own buffer
                with memoryview(self._buf) as view:
                    self._whole = bytearray(view[start:])
                self._filled = len(self._whole)
                self._pos = len(self._buf)
            return None
        with memoryview(self._buf) as view:
            frame = bytes(view[start:end])
        self._pos = end
        self._need = None
        return frame

    def next_api_key(self) -> int | None:
        """The api key of the next frame when all of it is already buffered (a pipelined request
        waiting behind the one being answered), else None. Consumes nothing."""
        if self._whole is not None:
            return None
        pos, buf = self._pos, self._buf
        if self._need is not None:  # its size was read: the payload starts at pos + 4
            size = self._need
        elif len(buf) - pos >= 4:
            (size,) = SIZE.unpack_from(buf, pos)
        else:
            return None
        if size < 2 or pos + 4 + size > len(buf):
            return None
        return (buf[pos + 4] << 8) | buf[pos + 5]

    def bytes_wanted(self) -> int:
        """How many more bytes the current frame needs (a read-size hint)."""
        if self._whole is not None:
            return self._need - self._filled
        if self._need is None:
            return max(4 - self.buffered, 1)
        return 4 + self._need - self.buffered


def frame(payload: bytes | bytearray) -> bytes:
    return SIZE.pack(len(payload)) + payload
