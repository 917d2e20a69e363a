import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import WHOLE_FRAME_BYTES, WHOLE_FRAME_STEP, FrameDecoder, FrameError, frame


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


def test_a_large_frame_is_received_into_its_own_buffer_and_handed_out_whole():
    payload = bytes(range(256)) * (WHOLE_FRAME_BYTES // 256 + 3)
    wire = frame(payload) + frame(b"next")
    decoder = FrameDecoder()
    decoder.feed(wire[:1000])
    assert decoder.next_frame() is None
    assert decoder.partial and decoder.bytes_wanted() == len(payload) + 4 - 1000
    at, got = 1000, None
    while got is None and (buffer := decoder.whole_frame_buffer()) is not None:
        with buffer:
            n = min(len(buffer), 5000)  # a socket gives what it has, at most the space offered
            buffer[:n] = wire[at:at + n]
        decoder.received(n)
        at += n
        got = decoder.next_frame()
    assert at == len(payload) + 4  # never a byte of the next frame
    assert isinstance(got, bytearray) and got == payload
    assert decoder.whole_frame_buffer() is None
    decoder.feed(wire[at:])
    assert decoder.next_frame() == b"next"


def test_a_large_frame_announced_but_not_sent_holds_only_about_what_arrived():
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", 90 * 1024 * 1024) + b"x" * WHOLE_FRAME_BYTES)
    assert decoder.next_frame() is None
    with decoder.whole_frame_buffer() as room:
        assert len(room) <= WHOLE_FRAME_STEP


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 5, 1000, WHOLE_FRAME_BYTES - 4, WHOLE_FRAME_BYTES, WHOLE_FRAME_BYTES + 77,
                                      2 * WHOLE_FRAME_STEP + 5]),
                      max_size=5),
       cuts=st.lists(st.integers(1, 3 * WHOLE_FRAME_BYTES), min_size=1, max_size=40), receive=st.booleans())
def test_frames_come_out_in_order_however_the_bytes_arrive(sizes, cuts, receive):
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    wire = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    out: list[bytes] = []
    at, i = 0, 0
    while at < len(wire):
        n = cuts[i % len(cuts)]
        i += 1
        buffer = decoder.whole_frame_buffer() if receive else None
        if buffer is not None:
            with buffer:
                n = min(n, len(buffer), len(wire) - at)
                buffer[:n] = wire[at:at + n]
            decoder.received(n)
        else:
            decoder.feed(wire[at:at + n])
            n = min(n, len(wire) - at)
        at += n
        while (got := decoder.next_frame()) is not None:
            out.append(bytes(got))
    assert out == payloads
    assert not decoder.partial


def test_next_api_key_names_a_whole_buffered_frame_without_consuming_it():
    decoder = FrameDecoder()
    produce, list_offsets = b"\x00\x00" + b"\x00\x09rest", b"\x00\x02" + b"\x00\x07rest"
    decoder.feed(frame(produce) + frame(list_offsets)[:5])
    assert decoder.next_api_key() == 0
    assert decoder.next_frame() == produce
    assert decoder.next_api_key() is None  # the next one is not all here
    assert decoder.next_frame() is None  # its size is read now
    assert decoder.next_api_key() is None
    decoder.feed(frame(list_offsets)[5:])
    assert decoder.next_api_key() == 2
    assert decoder.next_frame() == list_offsets
    assert decoder.next_api_key() is None
    decoder.feed(frame(b"\x00"))  # too short to hold an api key
    assert decoder.next_api_key() is None
