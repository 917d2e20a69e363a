"""The key worker: a second process that reads record keys out of the commitlog.

Indexing keys is per-record Python work (about 3 us a record). In a thread of the broker it
shares the GIL with the event loop: indexing every topic's keys that way cost 14% of produce
throughput and 3 ms of p99 latency (docs/notes/benchmark-history.md). So the walk over record headers runs
here, in its own interpreter, on the same commitlog files mapped read-only (the page cache is
shared, so no byte is copied between the processes), under Linux's SCHED_IDLE policy (it runs
only on CPU time nothing else wants; elsewhere at nice 19);
the broker's dispatcher thread sends it a range of one segment and adds the keys that come back
to the key index with a few numpy calls (store/key_index.py, KeyIndex.add_many). The index
files stay the broker's alone. Owns only its mappings; writes nothing.

Protocol, over a socketpair with multiprocessing.connection's framing: the broker sends
(path, segment start, size, local start, local stop, rolled, topic ids, max entries, max bytes);
the worker answers (local offset reached, hashes, positions, timestamps, deltas) as numpy
arrays, ("error", message) for an exception, or (local start, empty arrays) when the segment
file is gone (retention deleted it meanwhile). None ends it, as does the broker's end closing.
"""

from __future__ import annotations

import logging
import mmap
import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from store.key_entries import index_entries

log = logging.getLogger(__name__)
REPLY_TIMEOUT_S = 60.0  # a range of WORKER_ENTRIES entries takes milliseconds; this is a dead worker
NICENESS = 19  # where SCHED_IDLE is missing: the broker and its clients come first


class KeyWorkerError(Exception):
    """The worker could not start, died, or failed on a range."""


class KeyWorker:
    def __init__(self, process: subprocess.Popen | None, conn: Connection | None, retry_at: float = 0.0) -> None:
        self._process = process
        self._conn = conn
        self._retry_at = retry_at

    @classmethod
    def start(cls) -> KeyWorker:
        ours, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        try:
            process = subprocess.Popen([sys.executable, "-c", f"from store.key_worker import main; main({theirs.fileno()})"],
                                       pass_fds=(theirs.fileno(),), env=env, cwd=root,
                                       stdin=subprocess.DEVNULL, close_fds=True)
        except OSError as exc:
            ours.close()
            raise KeyWorkerError(f"cannot start the key worker: {exc}") from exc
        finally:
            theirs.close()
        return cls(process, Connection(ours.detach()))

    @classmethod
    def unavailable(cls, retry_after_s: float) -> KeyWorker:
        return cls(None, None, time.monotonic() + retry_after_s)

    @property
    def alive(self) -> bool:
        return self._conn is not None and self._process is not None and self._process.poll() is None

    def retry_due(self) -> bool:
        return time.monotonic() >= self._retry_at

    def index(self, path: Path, segment_start: int, size: int, local: int, stop: int, rolled: bool,
              topic_ids: frozenset[bytes], max_entries: int, max_bytes: int = 1 << 62):
        """The keys of the entries in [local, stop) of one segment: (local offset reached,
        (hashes, positions, timestamps, deltas))."""
        try:
            self._conn.send((str(path), segment_start, size, local, stop, rolled, topic_ids, max_entries, max_bytes))
            if not self._conn.poll(REPLY_TIMEOUT_S):
                raise KeyWorkerError(f"no answer in {REPLY_TIMEOUT_S:.0f} s")
            reply = self._conn.recv()
        except (OSError, EOFError) as exc:
            raise KeyWorkerError(f"the key worker is gone: {exc}") from exc
        if reply[0] == "error":
            raise KeyWorkerError(reply[1])
        return reply[0], reply[1:]

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._conn.close()
            self._conn = None
        if self._process is not None:
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def _empty():
    import numpy as np
    return (np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint32))


class _Segment:
    """A commitlog segment mapped read-only: what store.key_entries.index_entries reads."""

    def __init__(self, path: str, start: int, size: int) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            self._mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.view = memoryview(self._mm)
        self.start = start
        self.size = size

    @property
    def end(self) -> int:
        return self.start + self.size

    def find(self, sub: bytes, start: int, end: int) -> int:
        return self._mm.find(sub, start, end)

    def close(self) -> None:
        try:
            self.view.release()
            self._mm.close()
        except BufferError:  # a slice of it is still referenced: garbage collection unmaps it
            pass


def main(fd: int) -> None:
    try:  # only CPU time nothing else wants: under load the index falls behind, then catches up
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(NICENESS)
        except OSError:
            pass
    conn = Connection(fd)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the broker is gone
        if request is None:
            return
        path, start, size, local, stop, rolled, ids, max_entries, max_bytes = request
        try:
            # mapped for this request only: a segment retention deletes must not stay allocated
            # on disk because this process still maps it (the space comes back at the last unmap)
            seg = _Segment(path, start, size)
            try:
                reached, keys = index_entries(seg, local, stop, rolled,
                                              lambda _t, _p, topic_id, ids=ids: topic_id in ids, max_entries,
                                              max_bytes=max_bytes)
            finally:
                seg.close()
            reply = (reached, *keys)
        except FileNotFoundError:
            reply = (local, *_empty())
        except Exception as exc:  # noqa: BLE001 - every failure is the broker's to log
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:
            return  # the broker is gone

