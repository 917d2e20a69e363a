"""Flushing: the async periodic flusher and sync-mode group commit.

Owns FlushHandle (one shared by every append of a commit group) and the flusher thread.
In sync mode the thread takes the open group, fsyncs up to the highest position written
when it took it, and completes the whole group with one fsync. Never writes data and never
holds the append lock while fsyncing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from store.errors import StoreError


class FlushHandle:
    """Completes once every append that received it is durable (fsynced)."""

    __slots__ = ("_callbacks", "_done", "_error", "_latch", "_lock", "appends")

    def __init__(self) -> None:
        # A held lock as the latch, not threading.Event: completing releases it once, and each
        # waiter that gets it hands it on to the next, where Event's notify_all made the
        # flusher wake every waiter itself, under the GIL, before it could start the next fsync.
        self._latch = threading.Lock()
        self._latch.acquire()
        self._done = False
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[FlushHandle], None]] = []
        self._error: BaseException | None = None
        self.appends = 0  # appends in this group; any at all: somebody waits on it

    def done(self) -> bool:
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """True once durable; raises StoreError if the fsync failed."""
        if not self._done:
            if not self._latch.acquire(timeout=-1 if timeout is None else timeout):
                return False
            self._latch.release()
        if self._error is not None:
            raise StoreError(f"flush failed: {self._error}") from self._error
        return True

    def exception(self) -> BaseException | None:
        return self._error

    def add_done_callback(self, fn: Callable[[FlushHandle], None]) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        fn(self)

    def _complete(self, error: BaseException | None = None) -> None:
        with self._lock:
            self._error = error
            self._done = True
            callbacks, self._callbacks = self._callbacks, []
        self._latch.release()
        for fn in callbacks:
            fn(self)


class Flusher:
    """Background flusher thread.

    `flush_to(position)` must make commitlog bytes below `position` durable;
    `write_position()` must be called under `lock`, the store's append lock.
    """

    def __init__(self, sync: bool, interval_s: float, lock: threading.Lock,
                 write_position: Callable[[], int], flush_range: Callable[[int, int], None],
                 on_failure: Callable[[OSError], None] | None = None) -> None:
        self.sync = sync
        # A failed fsync is final. Retrying the same range is not safe: on Linux the failure
        # clears the pages' error and dirty state, so a retried fsync can "succeed" with the
        # data gone (the 2018 "fsyncgate"), and every later group would be acknowledged on
        # top of the hole. So the first error is kept, every group from then on completes with
        # it, and `on_failure` (the store going offline) is told once.
        self.failed: OSError | None = None
        self._on_failure = on_failure
        self.interval_s = interval_s
        self._lock = lock
        self._write_position = write_position
        self._flush_range = flush_range
        self.flushed = write_position()
        self.group = FlushHandle()
        self._wake = threading.Event()
        self._flush_lock = threading.Lock()
        self._stopping = False
        self.commits = 0  # group commits done (fsyncs that completed a group with appends)
        self.committed_appends = 0  # appends those commits made durable
        self._thread = threading.Thread(target=self._run, name="commitlog-flusher", daemon=True)
        self._thread.start()

    def claim(self, appends: int) -> None:
        """Count `appends` appends just written into the open group (`self.group`, their
        handle); call under the append lock."""
        group = self.group
        if group.appends == 0:
            self._wake.set()
        group.appends += appends

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(None if self.sync else self.interval_s)
            self._wake.clear()
            self.flush_now()

    def flush_now(self) -> None:
        with self._flush_lock:
            self._flush_once()

    def _flush_once(self) -> None:
        with self._lock:
            group = self.group
            if group.appends:
                self.group = FlushHandle()
            target = self._write_position()
        error = self.failed
        if error is None and target != self.flushed:
            try:
                self._flush_range(self.flushed, target)
                self.flushed = target
            except OSError as exc:
                error = self.failed = exc
                if self._on_failure is not None:
                    self._on_failure(exc)
        if group.appends:
            self.commits += 1
            self.committed_appends += group.appends
            group._complete(error)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self.flush_now()
