import struct

import pytest

from protocol.framing import FrameDecoder, FrameError, frame


def test_frames_split_across_reads_are_reassembled():
    decoder = FrameDecoder()
    data = frame(b"hello") + frame(b"") + frame(b"world")
    for i in range(len(data)):
        decoder.feed(data[i:i + 1])
    assert [decoder.next_frame(), decoder.next_frame(), decoder.next_frame()] == [b"hello", b"", b"world"]
    assert decoder.next_frame() is None


def test_incomplete_frame_returns_none_until_complete():
    decoder = FrameDecoder()
    decoder.feed(frame(b"abcdef")[:7])
    assert decoder.next_frame() is None
    assert decoder.partial
    decoder.feed(b"def")
    assert decoder.next_frame() == b"abcdef"
    assert not decoder.partial


def test_negative_size_is_a_frame_error():
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", -1))
    with pytest.raises(FrameError, match="negative"):
        decoder.next_frame()


def test_size_above_limit_is_refused_before_buffering_it():
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.feed(struct.pack(">i", 1025) + b"x" * 10)
    with pytest.raises(FrameError, match="socket.request.max.bytes"):
        decoder.next_frame()


def test_frame_at_exact_limit_is_accepted():
    decoder = FrameDecoder(max_frame_bytes=8)
    decoder.feed(frame(b"12345678"))
    assert decoder.next_frame() == b"12345678"
