"""Application 3: re-read a past stretch of the event topic by time and check it against the live run.

A batch query with Spark's Kafka source starts at --from-ms (startingTimestamp, or
startingOffsetsByTimestamp with --by-partition) and ends before --until-ms (endingTimestamp); the
broker turns each timestamp into offsets (ListOffsets by time). The events read are aggregated
exactly as the streaming job does, and every replayed window must equal the one the live run wrote
to its parquet copy. Exit status 0 when they all do.

    python -m spark_examples.replay_window --bootstrap 127.0.0.1:9092 --parquet /tmp/shop/aggregates \\
        --from-ms 1767225720000 --until-ms 1767225840000
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from spark_examples.connector import spark_session
from spark_examples.pipeline import AGGREGATE_COLUMNS, parse_events, window_aggregates
from spark_examples.topics import partitions_of


@dataclass
class Comparison:
    equal: list[dict] = field(default_factory=list)
    different: list[tuple[dict, dict]] = field(default_factory=list)
    not_in_live_run: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.equal) and not self.different and not self.not_in_live_run


def replay(spark: SparkSession, bootstrap: str, topic: str, from_ms: int, until_ms: int | None,
           by_partition: bool = False) -> DataFrame:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    reader = reader.option("includeHeaders", "true")
    if by_partition:
        partitions = partitions_of(bootstrap, topic)
        reader = reader.option("startingOffsetsByTimestamp", json.dumps({topic: {str(p): from_ms for p in partitions}}))
        if until_ms is not None:
            reader = reader.option("endingOffsetsByTimestamp",
                                   json.dumps({topic: {str(p): until_ms for p in partitions}}))
    else:
        reader = reader.option("startingTimestamp", str(from_ms))
        if until_ms is not None:
            reader = reader.option("endingTimestamp", str(until_ms))
    return window_aggregates(parse_events(reader.load()), watermark_delay=None)


def compare(replayed: list[dict], live: list[dict]) -> Comparison:
    def key(row: dict) -> tuple:
        return row["window_start_ms"], row["type"]

    live_by_key = {key(r): r for r in live}
    result = Comparison()
    for row in sorted(replayed, key=key):
        other = live_by_key.get(key(row))
        if other is None:
            result.not_in_live_run.append(row)
        elif all(row[c] == other[c] for c in AGGREGATE_COLUMNS):
            result.equal.append(row)
        else:
            result.different.append((row, other))
    return result


def run(spark: SparkSession, bootstrap: str, topic: str, parquet_path: str, from_ms: int,
        until_ms: int | None, by_partition: bool = False) -> Comparison:
    replayed = [r.asDict() for r in replay(spark, bootstrap, topic, from_ms, until_ms, by_partition).collect()]
    live = [r.asDict() for r in spark.read.parquet(parquet_path).select(*AGGREGATE_COLUMNS).collect()]
    return compare(replayed, live)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="host:port of Gregor or any Kafka")
    parser.add_argument("--topic", default="shop-events")
    parser.add_argument("--parquet", required=True, help="the live run's parquet copy")
    parser.add_argument("--from-ms", type=int, required=True, help="record time to start at (inclusive)")
    parser.add_argument("--until-ms", type=int, help="record time to stop before (default: the end)")
    parser.add_argument("--by-partition", action="store_true",
                        help="use startingOffsetsByTimestamp/endingOffsetsByTimestamp per partition")
    args = parser.parse_args(argv)

    spark = spark_session("replay-window")
    try:
        result = run(spark, args.bootstrap, args.topic, args.parquet, args.from_ms, args.until_ms, args.by_partition)
    finally:
        spark.stop()
    for row in result.equal:
        print(json.dumps({"equal": True, **row}))
    for row, other in result.different:
        print(json.dumps({"equal": False, "replayed": row, "live": other}))
    for row in result.not_in_live_run:
        print(json.dumps({"equal": False, "replayed": row, "live": None}))
    print(json.dumps({"replay_equals_live_run": result.ok, "windows_equal": len(result.equal),
                      "windows_different": len(result.different),
                      "windows_not_in_live_run": len(result.not_in_live_run)}))
    raise SystemExit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
