"""How a produced batch should reach the page cache: a probe of the commitlog's write path.

Five ways of putting 1 GiB of 16 KiB entries (a few bytes apart, as entries are) into a fresh,
fallocated segment file, each on a fresh file, in an order that alternates between rounds:

- `store`: through a shared mapping (`view[a:b] = bytes`), as Gregor's appends were written
  in async mode until issue 57;
- `pwrite`: `os.pwrite` of each entry, as they are written now (store/commitlog.py);
- `recv-into-mapping`: received from a socket straight into the mapping (`recv_into` a slice of
  it: one copy from socket to page cache, the issue's first idea);
- `recv+pwrite`: received into a reused buffer, then `pwrite` (two copies, as the broker does);
- `splice`: moved from the socket into a pipe and from the pipe into the file at the entry's
  position with `splice(2)` (one copy, by the kernel, as a follower applies shipped chunks).

The last three read from a sender process over loopback. Per way: wall seconds and the receiving
process's CPU seconds, median [lowest-highest] over the rounds. The first round of a run often
costs more for every way: memory this VM had handed back to its host faults in again.

Run: .venv/bin/python bench/write_path_probe.py [--repeat 3] [--gib 1] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import fcntl
import mmap
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTRY = 16 << 10
GAP = 61  # entries are not page-aligned: a header, the topic name
SENDER = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
chunk = b"x" * (1 << 20)
left = int(sys.argv[2])
while left > 0:
    left -= s.send(chunk[:min(len(chunk), left)])
s.close()
"""


def _fresh(path: Path, size: int) -> int:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, size)
    return fd


def _positions(size: int):
    pos = 0
    while pos + ENTRY <= size:
        yield pos
        pos += ENTRY + GAP


def store(fd: int, size: int) -> None:
    chunk = b"x" * ENTRY
    with mmap.mmap(fd, size) as mm:
        view = memoryview(mm)
        for pos in _positions(size):
            view[pos:pos + ENTRY] = chunk
        view.release()


def pwrite(fd: int, size: int) -> None:
    chunk = b"x" * ENTRY
    for pos in _positions(size):
        os.pwrite(fd, chunk, pos)


def _receiving(size: int):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    total = sum(ENTRY for _ in _positions(size))
    sender = subprocess.Popen([sys.executable, "-c", SENDER, str(port), str(total)])
    conn, _ = listener.accept()
    listener.close()
    return conn, sender


def _recv_exactly(conn: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            raise EOFError("the sender stopped early")
        got += n


def recv_into_mapping(fd: int, size: int) -> None:
    conn, sender = _receiving(size)
    with mmap.mmap(fd, size) as mm:
        view = memoryview(mm)
        for pos in _positions(size):
            _recv_exactly(conn, view[pos:pos + ENTRY])
        view.release()
    conn.close()
    sender.wait()


def recv_and_pwrite(fd: int, size: int) -> None:
    conn, sender = _receiving(size)
    buffer = bytearray(ENTRY)
    view = memoryview(buffer)
    for pos in _positions(size):
        _recv_exactly(conn, view)
        os.pwrite(fd, view, pos)
    conn.close()
    sender.wait()


def splice(fd: int, size: int) -> None:
    conn, sender = _receiving(size)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 1 << 20)
    sock = conn.fileno()
    try:
        for pos in _positions(size):
            moved = 0
            while moved < ENTRY:
                n = os.splice(sock, write_end, ENTRY - moved)
                if n == 0:
                    raise EOFError("the sender stopped early")
                while n:
                    w = os.splice(read_end, fd, n, offset_dst=pos + moved)
                    moved += w
                    n -= w
    finally:
        os.close(read_end)
        os.close(write_end)
    conn.close()
    sender.wait()


WAYS = {"store": store, "pwrite": pwrite, "recv-into-mapping": recv_into_mapping, "recv+pwrite": recv_and_pwrite,
        "splice": splice}


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    size = int(args.gib * (1 << 30))
    path = Path(args.dir) / f"write-path-probe-{os.getpid()}"
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in WAYS}
    try:
        for round_ in range(args.repeat):
            order = list(WAYS) if round_ % 2 == 0 else list(reversed(WAYS))
            for name in order:
                fd = _fresh(path, size)
                wall, cpu = time.perf_counter(), time.process_time()
                WAYS[name](fd, size)
                results[name][0].append(time.perf_counter() - wall)
                results[name][1].append(time.process_time() - cpu)
                os.close(fd)
                path.unlink()
                print(f"round {round_ + 1}: {name}: {results[name][0][-1]:.2f} s, {results[name][1][-1]:.2f} CPU s",
                      flush=True)
    finally:
        path.unlink(missing_ok=True)
    print(f"\n{args.gib:g} GiB of {ENTRY >> 10} KiB entries into a fresh fallocated file, {args.repeat} rounds, "
          "median [lowest-highest]:")
    print("| way | wall s | CPU s (this process) |\n|---|---:|---:|")
    for name, (walls, cpus) in results.items():
        print(f"| {name} | {_fmt(walls)} | {_fmt(cpus)} |")


if __name__ == "__main__":
    main()
