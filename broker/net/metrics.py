"""Broker metrics in Prometheus form (prometheus_client), served by broker/net/admin_http.py.

Counters are bumped by small hooks (broker/net/connection.py per request, the
produce handler per durable wait); gauges that describe state (partition
offsets, group lag) are computed when scraped (broker/net/state_metrics.py),
so they cost nothing between scrapes. Never does I/O itself.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

disable_created_metrics()  # *_created series only add noise to a broker's scrape
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        # The request counters are plain numbers bumped on the event loop and reported when
        # scraped (_RequestCounters): prometheus_client's Counter.inc takes a lock per call,
        # and three of them were 1.1 us of every request.
        self.requests_by_api: dict[str, int] = {}
        self.bytes_in = 0  # request frames received
        self.bytes_out = 0  # responses sent
        self.spliced_batches = 0  # produce batches received into a pipe (broker/net/splice.py)
        self.splice_spills = 0  # of them, completed in a buffer because the pipe filled
        self.registry.register(_RequestCounters(self))
        self.flush_wait = Histogram(
            "gregor_flush_wait_seconds",
            "Time a produce request waited for its group-commit fsync (flush.mode=sync)",
            buckets=_FLUSH_BUCKETS, registry=self.registry)

    def request(self, api: str, bytes_in: int, bytes_out: int) -> None:
        """Count one answered request (on the event loop only)."""
        counts = self.requests_by_api
        counts[api] = counts.get(api, 0) + 1
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out

    def totals(self) -> dict[str, float]:
        """The counters' totals since start, for the web console's rates (broker/console/history.py):
        bytes_in, bytes_out and requests per API as `<api>_requests` (e.g. Produce_requests)."""
        out = {"bytes_in": float(self.bytes_in), "bytes_out": float(self.bytes_out)}
        for api, count in list(self.requests_by_api.items()):
            out[f"{api}_requests"] = float(count)
        return out

    def watch(self, collector: Collector) -> None:
        """Report what `collector` computes at every scrape (broker/net/state_metrics.py)."""
        self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _RequestCounters(Collector):
    """The request counters as Prometheus counters, read at scrape time (from any thread: a
    snapshot of the per-API counts is taken first)."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._metrics = metrics

    def collect(self):
        metrics = self._metrics
        requests = CounterMetricFamily("gregor_requests", "Kafka requests answered, by API", labels=["api"])
        for api, count in list(metrics.requests_by_api.items()):
            requests.add_metric([api], count)
        yield requests
        yield CounterMetricFamily("gregor_request_bytes", "Bytes of Kafka request frames received",
                                  value=metrics.bytes_in)
        yield CounterMetricFamily("gregor_response_bytes", "Bytes of Kafka responses sent", value=metrics.bytes_out)
        yield CounterMetricFamily("gregor_produce_spliced_batches",
                                  "Produce batches received from the socket into a pipe (splice), for one copy",
                                  value=metrics.spliced_batches)
        yield CounterMetricFamily("gregor_produce_splice_spills",
                                  "Of those, batches whose pipe filled first: completed in a buffer",
                                  value=metrics.splice_spills)
