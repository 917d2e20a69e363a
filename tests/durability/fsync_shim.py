"""The failing-fsync shim (failing_fsync.c, an LD_PRELOAD library) built once per module that asks
for it: the `shim` fixture, the library's path."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SHIM_SOURCE = Path(__file__).with_name("failing_fsync.c")


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (cc/gcc) to build the failing-fsync shim")
    out = tmp_path_factory.mktemp("shim") / "failing_fsync.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM_SOURCE), "-ldl"], check=True)
    return out
