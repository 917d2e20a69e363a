"""Application 4: a downstream service reads only the events it cares about, from a Gregor view.

The coupon service of seed 001 needs registrations only. Instead of reading the whole event topic
and filtering in Spark, it reads a tag-filtered view: a read-only topic created through ordinary
CreateTopics with the configs view.source=<topic> and view.tags=<tag>[,<tag>...], whose records are
the source's records with a matching `tag` header, at the source's offsets. Spark's Kafka source
reads it like any topic (offsets have gaps, as in a compacted topic).

    python -m spark_examples.tagged_view --bootstrap 127.0.0.1:9092 --source shop-events \\
        --view shop-registrations --tags user.registered --create
"""

from __future__ import annotations

import argparse
import json

from pyspark.sql import DataFrame, SparkSession

from spark_examples.connector import spark_session
from spark_examples.pipeline import parse_events
from spark_examples.topics import create_view


def read_view(spark: SparkSession, bootstrap: str, view: str) -> DataFrame:
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", view)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    return parse_events(raw)


def run(spark: SparkSession, bootstrap: str, view: str) -> dict:
    events = read_view(spark, bootstrap, view)
    by_tag = {row["tag"]: row["count"] for row in events.groupBy("tag").count().collect()}
    users = events.select("user_id").distinct().count()
    return {"view": view, "records": sum(by_tag.values()), "by_tag": by_tag, "distinct_users": users}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="host:port of Gregor")
    parser.add_argument("--source", default="shop-events")
    parser.add_argument("--view", default="shop-registrations")
    parser.add_argument("--tags", default="user.registered", help="comma-separated")
    parser.add_argument("--create", action="store_true", help="create the view first")
    args = parser.parse_args(argv)

    if args.create:
        create_view(args.bootstrap, args.view, args.source, args.tags.split(","))
    spark = spark_session("tagged-view")
    try:
        print(json.dumps(run(spark, args.bootstrap, args.view)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
