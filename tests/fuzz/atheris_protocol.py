"""Coverage-guided fuzz target (atheris) over the frame decoder, request decoding
and the batch validator. Run: .venv/bin/python tests/fuzz/atheris_protocol.py
tests/fuzz/corpus -runs=200000. New interesting inputs land in the corpus
folder, which is kept in the repository and replayed by test_fuzz_corpus.py."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    from tests.fuzz.target import one_input


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
