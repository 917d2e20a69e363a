"""How many connections a broker holds, in all and per client address, against max.connections
and max.connections.per.ip, counted at accept (Kafka's ConnectionQuotas)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ConnectionCounts:
    """max.connections and max.connections.per.ip, counted at accept."""

    max_total: int
    max_per_ip: int
    total: int = 0
    per_ip: dict[str, int] = field(default_factory=dict)

    def admit(self, ip: str) -> str | None:
        if self.total >= self.max_total:
            return f"max.connections ({self.max_total}) reached"
        if self.per_ip.get(ip, 0) >= self.max_per_ip:
            return f"max.connections.per.ip ({self.max_per_ip}) reached for {ip}"
        self.total += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        left = self.per_ip[ip] - 1
        if left:
            self.per_ip[ip] = left
        else:
            del self.per_ip[ip]
