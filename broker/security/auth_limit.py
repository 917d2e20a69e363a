"""failed.authentication.limit: an address that failed to authenticate that many times within
failed.authentication.window.ms has its new connections refused at accept until the oldest
of those failures leaves the window. A Gregor addition: Kafka only delays each failed answer
(connection.failed.authentication.delay.ms), which a client with many connections outruns.

Sans-IO: every call takes `now_ms`; it never sleeps, logs or touches a socket. A success does
not reset an address's count. Memory stays bounded: at most `limit` times per address, and
addresses with nothing left in the window are swept once a window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    first: bool  # the first refusal of this address in a window: the one worth a WARNING


@dataclass
class FailedAuthentications:
    limit: int  # 0 or less: never refuse
    window_ms: int
    failures: dict[str, deque[float]] = field(default_factory=dict)  # address -> its newest failure times, oldest first
    reported: dict[str, float] = field(default_factory=dict)  # address -> when its refusal was last reported
    swept_ms: float = 0.0

    def record(self, address: str, now_ms: float) -> None:
        """One failed authentication (a SASL exchange, a refused client certificate) from `address`."""
        if self.limit <= 0:
            return
        if now_ms - self.swept_ms >= self.window_ms:
            self._sweep(now_ms)
        times = self.failures.get(address)
        if times is None:
            times = self.failures[address] = deque(maxlen=self.limit)
        times.append(now_ms)

    def refusal(self, address: str, now_ms: float) -> Refusal | None:
        """Why a new connection from `address` is refused now, or None when it may be served."""
        until = self._refused_until(address)
        if until is None or now_ms >= until:
            self.reported.pop(address, None)
            return None
        last = self.reported.get(address)
        first = last is None or now_ms - last >= self.window_ms
        if first:
            self.reported[address] = now_ms
        return Refusal(f"failed.authentication.limit ({self.limit} within {self.window_ms} ms) reached for "
                       f"{address}; its connections are refused for {until - now_ms:.0f} ms more", first)

    def _refused_until(self, address: str) -> float | None:
        """When the oldest of the address's last `limit` failures leaves the window, if it has that many."""
        times = self.failures.get(address)
        if self.limit <= 0 or times is None or len(times) < self.limit:
            return None
        return times[0] + self.window_ms

    def _sweep(self, now_ms: float) -> None:
        self.swept_ms = now_ms
        for address in [a for a, times in self.failures.items() if times[-1] + self.window_ms <= now_ms]:
            del self.failures[address]
        self.reported = {a: at for a, at in self.reported.items() if a in self.failures}
