"""Coverage-guided fuzz target (atheris) over the frame decoder, request decoding
and the batch validator. Run: .venv/bin/python tests/fuzz/atheris_protocol.py
tests/fuzz/corpus -runs=200000. New interesting inputs land in the corpus
folder, which is kept in the repository and replayed by test_fuzz_corpus.py."""

import sys

import atheris

with atheris.instrument_imports():
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


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
