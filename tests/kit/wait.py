"""The test kit's one way to wait: poll a condition until it is true or a deadline passes, failing with a message naming what was awaited."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Call condition() every `interval` seconds until it returns something truthy, and return that.
    Raises AssertionError naming `what` when `timeout` seconds pass first (the condition is asked
    once more at the deadline, so a slow condition still gets its last answer)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not within {timeout} s")
        time.sleep(interval)
