"""Failed logins, counted sans-IO (every call takes `now_ms`; nothing here sleeps, logs or touches
a socket):

- `FailedLogins`, for the listeners: Kafka delays each failed authentication's answer
  (connection.failed.authentication.delay.ms) and never refuses a correct one. Gregor does the
  same, and once one identity (the user name a client claimed, from one address) has failed
  failed.authentication.limit times within failed.authentication.window.ms, each further failed
  login of that identity waits twice as long as the one before, up to MAX_WAIT_MS: a password
  guesser slows down, and the right password, or another user behind the same NAT, is answered at
  once.
- `FailedAuthentications`, for the replication port between nodes (broker/cluster/access.py): an
  address that failed that many times has its new connections refused at accept until the
  oldest of those failures leaves the window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

MAX_WAIT_MS = 5000  # a throttled failure's answer: well within clients' 30 s request timeout
MAX_IDENTITIES = 10_000  # identities tracked at once; beyond it, an address's unknown users share one count


@dataclass(frozen=True, slots=True)
class Throttle:
    """How long a failed login's answer waits, and whether this is the first throttled failure
    of its identity in a window (the one worth a WARNING)."""

    wait_ms: float
    first: bool


@dataclass
class FailedLogins:
    delay_ms: int  # connection.failed.authentication.delay.ms: every failed answer waits this long
    limit: int  # failed.authentication.limit: from this many failures on, the wait doubles; 0: never
    window_ms: int
    failures: dict[tuple[str, str], deque[float]] = field(default_factory=dict)  # (address, user) -> failure times
    reported: dict[tuple[str, str], float] = field(default_factory=dict)  # identity -> when last throttled first
    swept_ms: float = 0.0

    def failed(self, address: str, user: str, now_ms: float) -> Throttle:
        """One failed login claiming `user` ("" when the client named none) from `address`."""
        if self.limit <= 0:
            return Throttle(self.delay_ms, False)
        if now_ms - self.swept_ms >= self.window_ms:
            self._sweep(now_ms)
        key = (address, user)
        if key not in self.failures and len(self.failures) >= MAX_IDENTITIES:
            key = (address, "*")  # a flood of invented names: they share one count
        times = self.failures.setdefault(key, deque(maxlen=self.limit + 16))
        while times and times[0] + self.window_ms <= now_ms:
            times.popleft()
        times.append(now_ms)
        excess = len(times) - self.limit + 1
        if excess <= 0:
            return Throttle(self.delay_ms, False)
        last = self.reported.get(key)
        first = last is None or now_ms - last >= self.window_ms
        if first:
            self.reported[key] = now_ms
        return Throttle(min(max(self.delay_ms, 100) * 2 ** min(excess, 16), MAX_WAIT_MS), first)

    def succeeded(self, address: str, user: str) -> None:
        """The right password: that identity's failures are forgotten."""
        self.failures.pop((address, user), None)
        self.reported.pop((address, user), None)

    def _sweep(self, now_ms: float) -> None:
        self.swept_ms = now_ms
        for key in [k for k, times in self.failures.items() if not times or times[-1] + self.window_ms <= now_ms]:
            del self.failures[key]
        self.reported = {k: at for k, at in self.reported.items() if k in self.failures}


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
