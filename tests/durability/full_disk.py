"""A small tmpfs for a broker's data dir, and ballast that fills it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def mount_tmpfs(path: Path, size: str) -> None:
    """Mount a tmpfs of `size` ("8m") on `path`, made if missing; skips the test where that is
    impossible (not root, or no mount allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def _ballast(fs: Path, leave: int) -> Path:
    """Fill the file system until `leave` bytes remain free."""
    path = fs / "ballast"
    stat = os.statvfs(fs)
    size = stat.f_bavail * stat.f_frsize - leave
    with open(path, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, size)
    return path
