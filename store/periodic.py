"""A background thread that calls one function at a fixed interval (retention, checkpoints).

Owns only the thread and its stop signal; errors are logged and the next round still runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, name: str, interval_s: float, fn: Callable[[], object]) -> None:
        self._name = name
        self._interval_s = interval_s
        self._fn = fn
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval_s(self) -> float:
        return self._interval_s

    @interval_s.setter
    def interval_s(self, seconds: float) -> None:
        """Takes effect after the wait under way."""
        self._interval_s = seconds

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._fn()
            except Exception:
                log.exception("%s failed; trying again in %.0f s", self._name, self._interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
