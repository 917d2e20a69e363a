"""Probe: what sync group commit can reach with 16 appender threads that each wait for their
own append, with the store's append taken out.

The store's Flusher and FlushHandle as they are, and an "append" that is only a 1 KiB pwrite()
(the store's own WriteBuffer.pwrite: the GIL kept, as sync mode writes) under a lock, so whatever the store adds can
only make the sync figure lower. Three variants, each against the same threads without
waiting (async):
  - real fdatasync;
  - fdatasync made a no-op: what the wake-ups alone allow;
  - real fdatasync, waiters spinning with os.sched_yield() (releases the GIL) for up to
    200 us before they block: the alternative to sleeping at once.

Run: .venv/bin/python bench/group_commit_probe.py [--appends N] [--repeat R]
Prints MB/s; the figures are quoted in docs/benchmarks.md, which this does not rewrite.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.store_bench import THREADS, time_threads
from store.flush import Flusher
from store.segment import WriteBuffer, write_zeros

BATCH_BYTES = 1024
FILE_BYTES = 64 << 20
SPIN_S = 200e-6


def run(path: Path, sync: bool, appends: int, fsync: bool = True, spin: bool = False) -> float:
    """MB/s of THREADS threads appending `appends` 1 KiB pwrites in all."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    write_zeros(fd, 0, FILE_BYTES)  # as sync mode's segments are
    batch = WriteBuffer(BATCH_BYTES)
    lock = threading.Lock()
    position = [0]
    flush = (lambda start, end: os.fdatasync(fd)) if fsync else (lambda start, end: None)
    flusher = Flusher(sync, 0.5, lock, lambda: position[0], flush)
    per_thread = appends // THREADS
    barrier = threading.Barrier(THREADS + 1)

    def appender() -> None:
        barrier.wait()
        for _ in range(per_thread):
            with lock:
                batch.pwrite(fd, BATCH_BYTES, position[0] % FILE_BYTES)
                position[0] += BATCH_BYTES
                handle = flusher.group if sync else None
                if sync:
                    flusher.claim(1)
            if handle is not None:
                if spin:
                    end = time.perf_counter() + SPIN_S
                    while not handle.done() and time.perf_counter() < end:
                        os.sched_yield()
                handle.wait()

    elapsed = time_threads([threading.Thread(target=appender) for _ in range(THREADS)], barrier)
    flusher.stop()
    os.close(fd)
    return per_thread * THREADS * BATCH_BYTES / elapsed / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gregor-probe-", dir=Path(__file__).resolve().parents[1]) as tmp:
        path = Path(tmp) / "log"
        for _ in range(args.repeat):
            async_ = run(path, False, args.appends * 2)
            real = run(path, True, args.appends)
            no_op = run(path, True, args.appends, fsync=False)
            spin = run(path, True, args.appends, spin=True)
            print(f"async {async_:6.1f} MB/s | sync: fdatasync {real:5.1f} ({real / async_:.0%}), "
                  f"no-op fdatasync {no_op:5.1f} ({no_op / async_:.0%}), "
                  f"spinning waiters {spin:5.1f} ({spin / async_:.0%})", flush=True)


if __name__ == "__main__":
    main()
