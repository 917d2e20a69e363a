"""Application 1: produce user-registration and order events to a topic through Spark's Kafka sink.

Each round is one Spark batch write of `--events-per-round` events covering `--minutes-per-round`
whole minutes of event time, with the key (user id), JSON value and `tag` header the sink sends as
Kafka record headers. The sink stamps records with the time they are sent, so the generator prints,
per round, a record-time interval that holds all of that round's records: the replay job re-reads
one round with startingTimestamp/endingTimestamp taken from it.

    python -m spark_examples.generate_events --bootstrap 127.0.0.1:9092 --topic shop-events
"""

from __future__ import annotations

import argparse
import json
import time

from pyspark.sql import SparkSession

from spark_examples.connector import spark_session
from spark_examples.events import TAG_HEADER, generate_round
from spark_examples.topics import ensure_topic

KAFKA_ROW_SCHEMA = "key binary, value binary, headers array<struct<key: string, value: binary>>"
DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: a fixed start makes runs comparable


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def run(spark: SparkSession, bootstrap: str, topic: str, rounds: int, events_per_round: int,
        minutes_per_round: int, start_ms: int, seed: int) -> list[dict]:
    """Write the rounds; one summary per round: its event-time span and record-time interval."""
    summaries = []
    for r in range(rounds):
        events = generate_round(r, events_per_round, start_ms, minutes_per_round, seed)
        rows = [(e.key(), e.value(), e.headers()) for e in events]
        frame = spark.createDataFrame(rows, KAFKA_ROW_SCHEMA)
        records_from_ms = now_ms()
        frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
        records_until_ms = now_ms() + 1
        summaries.append({
            "round": r,
            "events": len(events),
            "first_event_time_ms": events[0].event_time_ms,
            "last_event_time_ms": events[-1].event_time_ms,
            "records_from_ms": records_from_ms,
            "records_until_ms": records_until_ms,
        })
        while now_ms() <= records_until_ms:  # the next round's records start strictly later
            time.sleep(0.005)
    return summaries


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="host:port of Gregor or any Kafka")
    parser.add_argument("--topic", default="shop-events")
    parser.add_argument("--partitions", type=int, default=3, help="when the topic is created here")
    parser.add_argument("--tag-header", default=TAG_HEADER,
                        help="Gregor topic config tag.header for views; '' against Apache Kafka")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events-per-round", type=int, default=40)
    parser.add_argument("--minutes-per-round", type=int, default=2)
    parser.add_argument("--start-ms", type=int, default=DEFAULT_START_MS, help="event time of the first event")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    configs = {"tag.header": args.tag_header} if args.tag_header else {}
    ensure_topic(args.bootstrap, args.topic, args.partitions, configs)
    spark = spark_session("generate-events")
    try:
        for summary in run(spark, args.bootstrap, args.topic, args.rounds, args.events_per_round,
                           args.minutes_per_round, args.start_ms, args.seed):
            print(json.dumps(summary))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
