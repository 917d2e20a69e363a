"""Same-run baselines for bench/run.py: what the machine itself does without a broker.

- loopback TCP: one process sends 1 MiB chunks, another receives them into a buffer;
- file write: 1 MiB write() calls to a fresh file, then one fdatasync; and the latency
  of a 4 KiB write + fdatasync, which bounds sync-flush group commit.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import time
from pathlib import Path

CHUNK = 1 << 20


def _sink(port: int, total: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        got = 0
        while got < total:
            n = sock.recv_into(view)
            if n == 0:
                break
            got += n
        sock.sendall(b"k")


def loopback_mb_per_s(total: int) -> float:
    """Throughput of one TCP connection on 127.0.0.1, sender and receiver in separate processes."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        child = multiprocessing.get_context("fork").Process(target=_sink, args=(port, total))
        child.start()
        conn, _ = server.accept()
        payload = b"\0" * CHUNK
        start = time.perf_counter()
        sent = 0
        while sent < total:
            conn.sendall(payload)
            sent += CHUNK
        conn.recv(1)  # the receiver has everything
        elapsed = time.perf_counter() - start
        conn.close()
        child.join(30)
    return total / elapsed / 1e6


def file_write_mb_per_s(directory: Path, total: int) -> float:
    """Sequential 1 MiB write()s to a new file, including the final fdatasync."""
    path = directory / "baseline-write"
    payload = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(total // CHUNK):
            os.write(fd, payload)
        os.fdatasync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return total / elapsed / 1e6


def fdatasync_ms(directory: Path, rounds: int = 200) -> float:
    """Median milliseconds of a 4 KiB append followed by fdatasync."""
    path = directory / "baseline-fsync"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"\1" * 4096
    times = []
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    times.sort()
    return times[len(times) // 2] * 1000
