"""Broker metrics in Prometheus form (prometheus_client), served by broker/net/admin_http.py.

Counters are bumped by small hooks (broker/net/connection.py per request, the
produce handler per durable wait); gauges that describe state (partition
offsets, group lag) are computed when scraped (broker/net/state_metrics.py),
so they cost nothing between scrapes. Never does I/O itself.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.registry import Collector

disable_created_metrics()  # *_created series only add noise to a broker's scrape
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("gregor_requests", "Kafka requests answered, by API", ["api"],
                                registry=self.registry)
        self.bytes_in = Counter("gregor_request_bytes", "Bytes of Kafka request frames received",
                                registry=self.registry)
        self.bytes_out = Counter("gregor_response_bytes", "Bytes of Kafka responses sent",
                                 registry=self.registry)
        self.flush_wait = Histogram(
            "gregor_flush_wait_seconds",
            "Time a produce request waited for its group-commit fsync (flush.mode=sync)",
            buckets=_FLUSH_BUCKETS, registry=self.registry)
        self._apis: dict[str, Counter] = {}

    def request(self, api: str, bytes_in: int, bytes_out: int) -> None:
        child = self._apis.get(api)
        if child is None:
            child = self._apis[api] = self.requests.labels(api=api)
        child.inc()
        self.bytes_in.inc(bytes_in)
        self.bytes_out.inc(bytes_out)

    def totals(self) -> dict[str, float]:
        """The counters' totals since start, for the web console's rates (broker/console/history.py):
        bytes_in, bytes_out and requests per API as `<api>_requests` (e.g. Produce_requests)."""
        out = {"bytes_in": 0.0, "bytes_out": 0.0}
        for name, counter in (("bytes_in", self.bytes_in), ("bytes_out", self.bytes_out), ("", self.requests)):
            for family in counter.collect():
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        out[f"{sample.labels['api']}_requests" if not name else name] = sample.value
        return out

    def watch(self, collector: Collector) -> None:
        """Report what `collector` computes at every scrape (broker/net/state_metrics.py)."""
        self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)
