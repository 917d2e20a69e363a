"""The fuzz target shared by atheris and the corpus replay: feed bytes through the
frame decoder, request decoding and the batch validator; only protocol errors may
come out."""

from protocol.codec import MalformedRequest, decode_request
from protocol.framing import FrameDecoder, FrameError
from protocol.record_batch import InvalidBatch, validate_produce_records


def one_input(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    decoder.feed(data)
    try:
        while (frame := decoder.next_frame()) is not None:
            try:
                decode_request(frame)
            except MalformedRequest:
                pass
    except FrameError:
        pass
    try:
        validate_produce_records(data, 1 << 20)
    except InvalidBatch:
        pass
