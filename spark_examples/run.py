"""The examples in one command each, for a first run on a fresh machine (`bin/spark-example`).

    bash bin/spark-example orders    # generate events, run the streaming aggregation, show the result
    bash bin/spark-example replay    # re-read a past round by time, check it against the live run

`orders` starts a new run: its own topics (`shop-events-<run>`, `shop-event-aggregates-<run>`)
and directory (`spark-example-data/<run>/`: checkpoint, parquet copy, run.json), so running it
again never mixes runs. It writes three rounds of registration and order events through Spark's
Kafka sink, runs the windowed aggregation once over what is there (availableNow), prints the
windows it wrote, and reads the coupon service's tag-filtered view of registrations (Gregor only).
`replay` takes the newest run (or --run), re-reads round 1 with startingTimestamp/endingTimestamp
and compares every replayed window with the live run's; exit status 0 when they are all equal.
Against Apache Kafka (--bootstrap) everything but the view runs the same.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import socket
import sys
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidConfigurationError, KafkaError

from spark_examples import generate_events, replay_window, tagged_view, windowed_aggregates
from spark_examples.connector import ConnectorUnavailable, spark_session
from spark_examples.events import TAG_HEADER
from spark_examples.topics import create_view, ensure_topic

DATA = Path("spark-example-data")


def utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def check_broker(bootstrap: str) -> None:
    """One plain line and exit status 1 when nothing answers at `bootstrap` (a refused connection
    fails at once; the admin client alone would retry for 30 s first)."""
    host, _, port = bootstrap.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000, client_id="spark-example").close()
    except (KafkaError, OSError, ValueError) as e:
        sys.exit(f"no broker answers at {bootstrap} ({e}); start one with `bash bin/serve`")


def orders(bootstrap: str) -> int:
    run = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    source, output, view = f"shop-events-{run}", f"shop-event-aggregates-{run}", f"shop-registrations-{run}"
    home = DATA / run
    home.mkdir(parents=True)
    try:  # Gregor indexes the tag header for views; Apache Kafka refuses the config, so go without
        ensure_topic(bootstrap, source, 3, {"tag.header": TAG_HEADER})
        views = True
    except InvalidConfigurationError:
        ensure_topic(bootstrap, source, 3)
        views = False
    ensure_topic(bootstrap, output, 1)
    print(f"run {run}: topics {source} -> {output}, files in {home}/")

    spark = spark_session("spark-example-orders")
    try:
        rounds = generate_events.run(spark, bootstrap, source, rounds=3, events_per_round=40, minutes_per_round=2,
                                     start_ms=generate_events.DEFAULT_START_MS, seed=1)
        print("1. generated through Spark's Kafka sink (key = user id, JSON value, tag header = event type):")
        for r in rounds:
            print(f"   round {r['round']}: {r['events']} events, event time {utc(r['first_event_time_ms'])[11:19]}"
                  f"-{utc(r['last_event_time_ms'])[11:19]}, records stamped {utc(r['records_from_ms'])}"
                  f" .. {utc(r['records_until_ms'])}")

        parquet = str((home / "aggregates").resolve())
        query = windowed_aggregates.start(windowed_aggregates.kafka_source(spark, bootstrap, source),
                                          windowed_aggregates.kafka_and_parquet_writer(bootstrap, output, parquet),
                                          str((home / "checkpoint").resolve()))
        query.awaitTermination()
        if query.exception() is not None:
            print(f"the aggregation failed: {query.exception()}", file=sys.stderr)
            return 1
        windows = windowed_aggregates.read_results(spark, parquet)
        print(f"2. streaming aggregation (readStream kafka, 1-minute windows, 1-minute watermark, availableNow):"
              f" {len(windows)} windows written to {output} and {home}/aggregates")
        print(f"   {'window (UTC)':<19} {'type':<16} {'events':>6} {'amount':>10} {'largest':>9}")
        for w in windows:
            print(f"   {utc(w['window_start_ms'])[:16]:<19} {w['type']:<16} {w['events']:>6}"
                  f" {w['amount_cents'] / 100:>10.2f} {w['max_amount_cents'] / 100:>9.2f}")
        print(f"   ({sum(w['events'] for w in windows)} of 120 events; round 2's windows wait for the watermark)")

        if views:
            create_view(bootstrap, view, source, ["user.registered"])
            summary = tagged_view.run(spark, bootstrap, view)
            print(f"3. the coupon service's view {view} (view.tags=user.registered): {summary['records']} "
                  f"registrations from {summary['distinct_users']} users, read with spark.read.format(\"kafka\")")
        else:
            print("3. tag-filtered view: skipped, this broker is not Gregor")
        (home / "run.json").write_text(json.dumps({"run": run, "bootstrap": bootstrap, "source": source,
                                                   "parquet": parquet, "rounds": rounds}, indent=1))
        print("next: bash bin/spark-example replay")
        return 0
    finally:
        spark.stop()


def replay(bootstrap: str, run: str | None) -> int:
    runs = sorted(p.parent.name for p in DATA.glob("*/run.json"))
    if not runs or (run is not None and run not in runs):
        sys.exit(f"no run {run or 'at all'} in {DATA}/: run `bash bin/spark-example orders` first")
    state = json.loads((DATA / (run or runs[-1]) / "run.json").read_text())
    r1, r2 = state["rounds"][1], state["rounds"][2]
    print(f"replay of run {state['run']}: {state['source']} from {utc(r1['records_from_ms'])} until "
          f"{utc(r2['records_from_ms'])} (round 1), startingTimestamp/endingTimestamp")
    spark = spark_session("spark-example-replay")
    try:
        result = replay_window.run(spark, bootstrap, state["source"], state["parquet"],
                                   r1["records_from_ms"], r2["records_from_ms"])
    finally:
        spark.stop()
    for row in result.equal:
        print(f"   equal      {utc(row['window_start_ms'])[:16]} {row['type']:<16} {row['events']:>3} events")
    for row, live in result.different:
        print(f"   DIFFERENT  {utc(row['window_start_ms'])[:16]} {row['type']:<16} replayed {row} live {live}")
    for row in result.not_in_live_run:
        print(f"   NOT LIVE   {utc(row['window_start_ms'])[:16]} {row['type']:<16} {row['events']:>3} events")
    print(f"{len(result.equal)} windows equal to the live run's, {len(result.different)} different, "
          f"{len(result.not_in_live_run)} not written by the live run")
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("example", choices=["orders", "replay"])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="host:port of Gregor (or any Kafka)")
    parser.add_argument("--run", help="replay: which run (default: the newest)")
    args = parser.parse_args(argv)
    check_broker(args.bootstrap)
    try:
        return orders(args.bootstrap) if args.example == "orders" else replay(args.bootstrap, args.run)
    except ConnectorUnavailable as e:
        sys.exit(str(e))


if __name__ == "__main__":
    sys.exit(main())
