"""The Spark transformations the applications share: Kafka rows → events → windowed aggregates →
Kafka rows. No I/O here; the applications choose sources, sinks and triggers."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_examples.events import TAG_HEADER

EVENT_SCHEMA = StructType([
    StructField("seq", LongType()),
    StructField("type", StringType()),
    StructField("user_id", StringType()),
    StructField("order_id", StringType()),
    StructField("amount_cents", LongType()),
    StructField("event_time_ms", LongType()),
])
AGGREGATE_COLUMNS = ["window_start_ms", "window_end_ms", "type", "events", "amount_cents", "max_amount_cents"]


def header(name: str) -> Column:
    """The first value of header `name` as a string (the source needs includeHeaders=true)."""
    return F.expr(f"filter(headers, h -> h.key = '{name}')[0].value").cast("string")


def parse_events(kafka_rows: DataFrame) -> DataFrame:
    """Kafka source rows → one row per event, with its tag header and where it came from."""
    return kafka_rows.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event"),
        header(TAG_HEADER).alias("tag"),
        "partition",
        "offset",
        F.col("timestamp").alias("record_timestamp"),
    ).select("event.*", "tag", "partition", "offset", "record_timestamp").withColumn(
        "event_time", F.timestamp_millis("event_time_ms")
    )


def window_aggregates(events: DataFrame, watermark_delay: str | None) -> DataFrame:
    """Per one-minute event-time window and event type: count, amount, largest amount. With a
    watermark (streaming, append mode) a window is emitted once, when the watermark passes it."""
    if watermark_delay:
        events = events.withWatermark("event_time", watermark_delay)
    return (
        events.groupBy(F.window("event_time", "1 minute"), "type")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum("amount_cents").alias("amount_cents"),
            F.max("amount_cents").alias("max_amount_cents"),
        )
        .select(
            F.unix_millis(F.col("window.start")).alias("window_start_ms"),
            F.unix_millis(F.col("window.end")).alias("window_end_ms"),
            "type",
            "events",
            "amount_cents",
            "max_amount_cents",
        )
    )


def aggregates_as_kafka_rows(aggregates: DataFrame) -> DataFrame:
    """Rows for Spark's Kafka sink: key type@window, JSON value, and the type as tag header."""
    return aggregates.select(
        F.concat_ws("@", "type", F.col("window_start_ms").cast("string")).alias("key"),
        F.to_json(F.struct(*AGGREGATE_COLUMNS)).alias("value"),
        F.array(F.struct(F.lit(TAG_HEADER).alias("key"), F.col("type").cast("binary").alias("value"))).alias("headers"),
    )
