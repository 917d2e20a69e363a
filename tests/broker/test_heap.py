"""broker/heap.py: with its settings, buffers the size of produce requests are reused from the
heap instead of being faulted in from fresh pages on every request (glibc only)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the broker does per produce request: the bytes received, a copy into the decoder's
# buffer, the frame cut from it; all freed before the next request. Prints the page faults.
CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from broker.heap import keep_freed_heap
if {tuned}:
    assert keep_freed_heap()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for size in (1 << 20, 1 << 20, 4 << 20):
    before = faults()
    for _ in range(50):
        received = b"x" * size
        buffered = bytearray(received)
        frame = bytes(memoryview(buffered)[4:])
        del received, buffered, frame
print(faults() - before)
"""


def faults_per_request(tuned: bool) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), tuned=tuned)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return int(out) / 50


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's")
def test_request_sized_buffers_are_reused_not_faulted_in_again():
    pages = (4 << 20) * 3 // 4096  # the three 4 MiB buffers' pages, had each to be faulted in
    untuned = faults_per_request(False)
    tuned = faults_per_request(True)
    assert tuned < pages / 20, (f"{tuned:.0f} page faults per request with broker/heap.py's settings "
                                f"({untuned:.0f} with glibc's defaults)")
