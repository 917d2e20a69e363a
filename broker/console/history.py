"""A few minutes of the broker's rates and each group's lag, for the console's charts (sans-IO: the
caller passes the time and the readings; broker/console/routes.py samples every INTERVAL_S)."""

from __future__ import annotations

from collections import deque
from typing import Any

INTERVAL_S = 5.0
KEEP = 120  # samples: 10 minutes at 5 s
MAX_GROUPS = 1000  # groups whose lag is remembered (the rest: only their current lag)
MAX_PARTITIONS_PER_GROUP = 256  # partitions whose own lag is remembered per group


class Rates:
    """Counters (totals since start) sampled over time, answered as per-second rates."""

    def __init__(self, keep: int = KEEP) -> None:
        self._samples: deque[tuple[float, dict[str, float]]] = deque(maxlen=keep + 1)

    def add(self, now_s: float, totals: dict[str, float]) -> None:
        self._samples.append((now_s, dict(totals)))

    def rates(self) -> list[dict[str, Any]]:
        """One entry per interval, oldest first: {"t": epoch ms, name: per second}. A total that
        went down (a deleted topic's messages) reads as 0, not as a negative rate."""
        out = []
        samples = list(self._samples)
        for (t0, a), (t1, b) in zip(samples, samples[1:]):
            span = t1 - t0
            if span <= 0:
                continue
            entry: dict[str, Any] = {"t": int(t1 * 1000)}
            for name, value in b.items():
                entry[name] = max(value - a.get(name, value), 0) / span
            out.append(entry)
        return out


class LagHistory:
    """Each group's total lag and its partitions' lag over time."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._groups: dict[str, deque[dict[str, Any]]] = {}

    def add(self, now_s: float, lags: dict[str, dict[tuple[str, int], int]]) -> None:
        """`lags`: group -> (topic, partition) -> lag, for the groups that exist now (others are forgotten)."""
        for gone in set(self._groups) - set(lags):
            del self._groups[gone]
        for group, partitions in list(lags.items())[:MAX_GROUPS]:
            samples = self._groups.get(group)
            if samples is None:
                samples = self._groups[group] = deque(maxlen=self.keep)
            shown = dict(sorted(partitions.items())[:MAX_PARTITIONS_PER_GROUP])
            samples.append({"t": int(now_s * 1000), "lag": sum(partitions.values()),
                            "partitions": {f"{t}-{p}": lag for (t, p), lag in shown.items()}})

    def samples(self, group: str) -> list[dict[str, Any]]:
        return list(self._groups.get(group, ()))
