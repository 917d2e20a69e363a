"""Runs kcat (librdkafka's command-line client, Debian 12: kcat 1.7.1 on librdkafka 2.0.2).

bin/setup-clients installs it with apt-get. This module only finds it and runs it.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest


class KcatError(Exception):
    """kcat exited non-zero or hung; carries its output."""

    def __init__(self, message: str, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


@functools.cache
def kcat_available() -> tuple[bool, str]:
    """Whether kcat runs; otherwise the reason, for a loud pytest.skip."""
    if shutil.which("kcat") is None:
        return False, "kcat not on PATH (bin/setup-clients installs it with apt-get as root)"
    try:
        proc = subprocess.run(["kcat", "-V"], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"kcat -V failed: {e}"
    if proc.returncode != 0:
        return False, f"kcat -V exited {proc.returncode}: {proc.stderr.strip()}"
    return True, ""


def require_kcat() -> None:
    """Skip the calling test, loudly, when kcat cannot run."""
    ok, reason = kcat_available()
    if not ok:
        pytest.skip(f"kcat unavailable: {reason}")


def run_kcat(
    args: list[str], input: str | None = None, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run `kcat *args` (feeding `input` on stdin) and return the finished process.

    Raises KcatError on a non-zero exit or when it is still running after `timeout` seconds;
    give consumers -e (exit at end of partition) or -c N so they end by themselves.
    """
    try:
        proc = subprocess.run(
            ["kcat", *args], check=False, input=input, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise KcatError(f"kcat {' '.join(args)} still running after {timeout}s: {err[-2000:]}", out, err)
    if proc.returncode != 0:
        raise KcatError(
            f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}",
            proc.stdout,
            proc.stderr,
        )
    return proc
