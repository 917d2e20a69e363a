"""Gauges of the broker's state, computed when /metrics is scraped (broker/net/admin_http.py
registers the collector): partitions' offsets, the log cleaner, the key index, groups' lag, and
the topology's replication figures. Reads the store and the coordinators; never does I/O itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.views.definition import view_of

if TYPE_CHECKING:
    from broker.broker import Broker


class StateCollector(Collector):
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
        yield from self.broker.topology.metrics()  # a broker group's node: its role, its followers' lag
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
