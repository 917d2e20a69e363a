"""Broker metrics in Prometheus form (prometheus_client), served by broker/net/admin_http.py.

Counters are bumped by small hooks (broker/net/connection.py per request, the
produce handler per durable wait); gauges that describe state (partition
offsets, group lag) are computed when scraped, from the store and the group
coordinator, so they cost nothing between scrapes. Never does I/O itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.views.definition import view_of

if TYPE_CHECKING:
    from broker.broker import Broker

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

    def watch(self, broker: Broker) -> None:
        """Report the broker's partitions and groups at every scrape."""
        self.registry.register(_StateCollector(broker))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        store = self.broker.store
        yield GaugeMetricFamily("gregor_key_index_behind_bytes",
                                "Commitlog bytes written but not yet key-indexed (the key dispatcher runs behind the writer)",
                                value=store.key_index_behind())
        totals = store.cleaner.totals  # the log cleaner since start (store/compaction.py)
        for name, value, text in (
                ("records_read", totals.records_read, "Records the log cleaner read in its cleaning passes"),
                ("records_removed", totals.records_removed, "Superseded records (and expired tombstones) removed"),
                ("bytes_read", totals.bytes_read, "Batch bytes the log cleaner read in its cleaning passes"),
                ("batches_relocated", totals.batches_relocated,
                 "Batches re-encoded or carried forward as relocated commitlog entries"),
                ("bytes_relocated", totals.bytes_relocated, "Bytes of relocated batches appended"),
                ("seconds", totals.seconds, "Seconds the log cleaner spent cleaning, its pauses included")):
            yield CounterMetricFamily(f"gregor_log_cleaner_{name}", text, value=value)
        yield GaugeMetricFamily("gregor_log_dir_offline",
                                "1 once a commitlog fsync or write failed: appends are refused until restart",
                                value=0 if store.offline is None else 1)
        end = GaugeMetricFamily("gregor_partition_end_offset", "Log end offset (high watermark)",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("gregor_partition_start_offset", "Log start offset",
                                  labels=["topic", "partition"])
        ends: dict[tuple[str, int], int] = {}
        topics = store.topics()
        for meta in topics.values():
            if view_of(meta) is not None:
                continue
            for p in range(meta.partitions):
                ends[(meta.name, p)] = hw = store.high_watermark(meta.name, p)
                end.add_metric([meta.name, str(p)], hw)
                start.add_metric([meta.name, str(p)], store.log_start_offset(meta.name, p))
        yield end
        yield start
        yield from _replication(self.broker)
        lag = GaugeMetricFamily("gregor_group_lag", "End offset minus the group's committed offset",
                                labels=["group", "topic", "partition"])
        coordinator = self.broker.coordinator
        if coordinator is not None:
            for group, _, _ in coordinator.list_groups():
                for (topic, partition), (offset, _, _) in coordinator.committed_all(group).items():
                    view = view_of(topics.get(topic))
                    hw = ends.get((view.source if view else topic, partition))
                    if hw is not None and offset >= 0:
                        lag.add_metric([group, topic, str(partition)], max(hw - offset, 0))
        yield lag


def _replication(broker: Broker) -> Iterator[Metric]:
    """A broker group's node (docs/replication.md): its role and, on the master, how far each
    follower is behind."""
    cluster = broker.cluster
    if cluster is None:
        return
    yield GaugeMetricFamily("gregor_replication_master", "1 while this node is its broker group's master",
                            value=1 if cluster.leading else 0)
    yield GaugeMetricFamily("gregor_replication_sync_state_set_size", "Nodes in the group's sync-state set (ISR)",
                            value=len(cluster.sync_state_set))
    behind = GaugeMetricFamily("gregor_replication_follower_lag_bytes",
                               "Master's commitlog end minus the position a follower last reported holding",
                               labels=["node"])
    for node, bytes_behind in cluster.follower_lag().items():
        behind.add_metric([str(node)], bytes_behind)
    yield behind
