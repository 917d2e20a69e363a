"""Replays the committed fuzz corpus (seeds plus what atheris found) through the
same target: every input must be refused only with a protocol error."""

from pathlib import Path

import pytest

from tests.fuzz.target import one_input

CORPUS = sorted((Path(__file__).parent / "corpus").iterdir())


@pytest.mark.parametrize("path", CORPUS, ids=[p.name[:16] for p in CORPUS])
def test_corpus_input_is_handled(path):
    one_input(path.read_bytes())


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 20


def test_atheris_finds_no_crash_in_a_bounded_run(tmp_path):
    """20,000 coverage-guided runs from a copy of the corpus (the repo's corpus is not grown by CI)."""
    import shutil
    import subprocess
    import sys
    pytest.importorskip("atheris", reason="atheris did not install on this machine")
    work = tmp_path / "corpus"
    shutil.copytree(Path(__file__).parent / "corpus", work)
    target = Path(__file__).parent / "atheris_protocol.py"
    proc = subprocess.run([sys.executable, str(target), str(work), "-runs=20000", "-max_len=2048"],
                          cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done 20000 runs" in proc.stderr
