"""Application 2: a Structured Streaming job from the event topic to per-minute aggregates.

Reads the topic with Spark's Kafka source (subscribe, startingOffsets=earliest, includeHeaders),
parses the JSON events, and counts events and amounts per one-minute event-time window and event
type with a watermark, in append mode: a window is written once, when the watermark (largest event
time seen minus --watermark) has passed its end. Each micro-batch's finished windows go to the
output topic through Spark's Kafka sink (key type@window, JSON value, tag header) and to a parquet
copy, which the replay job compares against.

    python -m spark_examples.windowed_aggregates --bootstrap 127.0.0.1:9092 \\
        --checkpoint /tmp/shop/checkpoint --parquet /tmp/shop/aggregates --available-now
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_examples.connector import spark_session
from spark_examples.pipeline import (
    AGGREGATE_COLUMNS,
    aggregates_as_kafka_rows,
    parse_events,
    window_aggregates,
)
from spark_examples.topics import ensure_topic

BatchWriter = Callable[[DataFrame, int], None]


def kafka_source(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The event topic as a stream of Kafka source rows, from the first offset, with headers."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )


def kafka_and_parquet_writer(bootstrap: str, output_topic: str, parquet_path: str) -> BatchWriter:
    """foreachBatch body: the batch's finished windows to the output topic, then to parquet."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            (aggregates_as_kafka_rows(batch).write.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic).save())
            batch.select(*AGGREGATE_COLUMNS).write.mode("append").parquet(parquet_path)
        finally:
            batch.unpersist()

    return write_batch


def start(raw: DataFrame, write_batch: BatchWriter, checkpoint: str, watermark: str = "1 minute",
          available_now: bool = True, processing_time: str = "10 seconds") -> StreamingQuery:
    """Start the aggregation over a stream of Kafka source rows (see kafka_source)."""
    aggregates = window_aggregates(parse_events(raw), watermark)
    writer = aggregates.writeStream.outputMode("append").option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=processing_time)
    return writer.foreachBatch(write_batch).queryName("shop-event-aggregates").start()


def read_results(spark: SparkSession, parquet_path: str) -> list[dict]:
    rows = spark.read.parquet(parquet_path).orderBy("window_start_ms", "type").collect()
    return [row.asDict() for row in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="host:port of Gregor or any Kafka")
    parser.add_argument("--source", default="shop-events")
    parser.add_argument("--output-topic", default="shop-event-aggregates")
    parser.add_argument("--parquet", required=True, help="directory of the parquet copy")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it to resume)")
    parser.add_argument("--watermark", default="1 minute")
    parser.add_argument("--available-now", action="store_true",
                        help="process what is there, then stop (default: run with --processing-time)")
    parser.add_argument("--processing-time", default="10 seconds")
    parser.add_argument("--run-seconds", type=float, default=300, help="stop a continuous run after this long")
    args = parser.parse_args(argv)

    ensure_topic(args.bootstrap, args.output_topic, 1)
    spark = spark_session("windowed-aggregates")
    try:
        query = start(kafka_source(spark, args.bootstrap, args.source),
                      kafka_and_parquet_writer(args.bootstrap, args.output_topic, args.parquet),
                      args.checkpoint, args.watermark, args.available_now, args.processing_time)
        if not query.awaitTermination(args.run_seconds):
            query.stop()
        if query.exception() is not None:
            raise SystemExit(f"query failed: {query.exception()}")
        for row in read_results(spark, args.parquet):
            print(json.dumps(row))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
