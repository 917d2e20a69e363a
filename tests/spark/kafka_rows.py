"""Events as the rows Spark's Kafka source produces (its fixed schema), for tests of the
examples' transformations that run without the connector."""

from __future__ import annotations

from datetime import UTC, datetime

from spark_examples.events import Event

KAFKA_SOURCE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)


def kafka_rows(events: list[Event], topic: str = "shop-events", partitions: int = 3) -> list[tuple]:
    rows = []
    offsets = [0] * partitions
    for e in events:
        p = e.seq % partitions
        record_time = datetime.fromtimestamp(e.event_time_ms / 1000, UTC)
        rows.append((e.key(), e.value(), topic, p, offsets[p], record_time, 0, e.headers()))
        offsets[p] += 1
    return rows
