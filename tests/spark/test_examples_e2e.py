"""The four spark_examples applications end to end against a fresh Gregor, through Spark's own
Kafka source and sink. Needs the connector (SPARK_KAFKA_JARS, or Maven for --packages); without it
every test here is skipped with the reason, and test_spark_kafka_calls.py covers the calls."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from spark_examples import generate_events, replay_window, tagged_view, windowed_aggregates
from spark_examples.events import closed_windows, expected_aggregates, generate_round
from spark_examples.topics import create_view, ensure_topic
from tests.kit.gregor import ROOT, start_broker

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("kafka_connector")]

SOURCE, OUTPUT, PARTITIONS = "shop-events", "shop-event-aggregates", 3
ROUNDS, PER_ROUND, MINUTES, SEED = 3, 40, 2, 11
START_MS = generate_events.DEFAULT_START_MS
EVENTS = [e for r in range(ROUNDS) for e in generate_round(r, PER_ROUND, START_MS, MINUTES, SEED)]


@pytest.fixture(scope="module")
def pipeline(kafka_connector, spark, tmp_path_factory):
    """A fresh broker; the generator's rounds; one availableNow run of the aggregation job."""
    tmp = tmp_path_factory.mktemp("spark-e2e")
    broker = start_broker(tmp, **{"group.initial.rebalance.delay.ms": "0"})
    try:
        bootstrap = broker.bootstrap
        ensure_topic(bootstrap, SOURCE, PARTITIONS, {"tag.header": "tag"})
        ensure_topic(bootstrap, OUTPUT, 1)
        rounds = generate_events.run(spark, bootstrap, SOURCE, ROUNDS, PER_ROUND, MINUTES, START_MS, SEED)
        parquet = str(tmp / "aggregates")
        query = windowed_aggregates.start(
            windowed_aggregates.kafka_source(spark, bootstrap, SOURCE),
            windowed_aggregates.kafka_and_parquet_writer(bootstrap, OUTPUT, parquet),
            str(tmp / "checkpoint"),
        )
        assert query.awaitTermination(300), "availableNow query did not finish in 300 s"
        assert query.exception() is None
        yield {"bootstrap": bootstrap, "rounds": rounds, "parquet": parquet, "tmp": tmp}
    finally:
        broker.stop()


def read_topic(bootstrap: str, topic: str, partitions: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5_000)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    end = consumer.end_offsets(tps)
    records = []
    deadline = time.monotonic() + 30
    while sum(consumer.position(tp) for tp in tps) < sum(end.values()) and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=1_000)
        records += [r for rs in batch.values() for r in rs]
    consumer.close()
    return records


def live_expected() -> dict:
    return closed_windows(expected_aggregates(EVENTS), max(e.event_time_ms for e in EVENTS), 60_000)


def test_generator_writes_every_event_with_key_value_and_tag_header(pipeline):
    records = read_topic(pipeline["bootstrap"], SOURCE, PARTITIONS)
    assert len(records) == ROUNDS * PER_ROUND == 120
    by_value = {r.value: r for r in records}
    for e in EVENTS:
        record = by_value[e.value()]
        assert record.key == e.key() and list(record.headers) == e.headers()
    for summary in pipeline["rounds"]:  # each round's records lie inside its printed interval
        values = {e.value() for e in EVENTS[summary["round"] * PER_ROUND:(summary["round"] + 1) * PER_ROUND]}
        stamps = [r.timestamp for r in records if r.value in values]
        assert summary["records_from_ms"] <= min(stamps) and max(stamps) < summary["records_until_ms"]


def test_live_run_writes_exactly_the_closed_windows_to_topic_and_parquet(pipeline, spark):
    expected = live_expected()
    assert len(expected) == 16  # rounds 0 and 1 (4 minutes x 4 types); round 2 is behind the watermark
    rows = windowed_aggregates.read_results(spark, pipeline["parquet"])
    got = {(r["window_start_ms"], r["type"]): (r["events"], r["amount_cents"], r["max_amount_cents"]) for r in rows}
    assert len(rows) == 16 and got == expected
    assert sum(v[0] for v in got.values()) == 80

    records = read_topic(pipeline["bootstrap"], OUTPUT, 1)
    assert len(records) == 16
    assert sorted(r.key.decode() for r in records) == sorted(f"{t}@{w}" for w, t in expected)
    assert all(list(r.headers) == [("tag", r.key.split(b"@")[0])] for r in records)


@pytest.mark.parametrize("by_partition", [False, True], ids=["startingTimestamp", "startingOffsetsByTimestamp"])
def test_replay_of_a_past_round_equals_the_live_run(pipeline, spark, by_partition):
    round1, round2 = pipeline["rounds"][1], pipeline["rounds"][2]
    result = replay_window.run(spark, pipeline["bootstrap"], SOURCE, pipeline["parquet"],
                               round1["records_from_ms"], round2["records_from_ms"], by_partition)
    assert result.ok, (result.different, result.not_in_live_run)
    assert len(result.equal) == 8  # round 1: 2 minutes x 4 types
    assert sum(r["events"] for r in result.equal) == PER_ROUND


def test_replay_of_the_open_round_reports_windows_the_live_run_has_not_written(pipeline, spark):
    result = replay_window.run(spark, pipeline["bootstrap"], SOURCE, pipeline["parquet"],
                               pipeline["rounds"][2]["records_from_ms"], None)
    assert not result.ok and len(result.not_in_live_run) == 8 and not result.equal


def test_view_job_reads_only_the_tagged_events(pipeline, spark):
    view = "shop-registrations"
    try:
        create_view(pipeline["bootstrap"], view, SOURCE, ["user.registered"])
    except Exception as e:  # noqa: BLE001 - any refusal means this broker has no views
        pytest.skip(f"creating the view through CreateTopics (view.source/view.tags) failed: {e!r}")
    summary = tagged_view.run(spark, pipeline["bootstrap"], view)
    registrations = [e for e in EVENTS if e.type == "user.registered"]
    assert summary["by_tag"] == {"user.registered": len(registrations)} and len(registrations) == 15
    assert summary["distinct_users"] == len({e.user_id for e in registrations})


def test_generator_command_line_runs_as_documented(pipeline):
    bootstrap = pipeline["bootstrap"]
    proc = subprocess.run(
        [sys.executable, "-m", "spark_examples.generate_events", "--bootstrap", bootstrap, "--topic", "cli-events",
         "--rounds", "1", "--events-per-round", "8"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"events": 8' in proc.stdout
    assert len(read_topic(bootstrap, "cli-events", 3)) == 8


def test_the_readme_commands_run_the_orders_example_then_replay_it(pipeline, tmp_path):
    """What spark_examples/README.md tells a new user to run (`bin/spark-example orders`, then
    `replay`), as `python -m spark_examples.run` against a running Gregor, in a fresh directory."""
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "spark_examples.run", *args, "--bootstrap", pipeline["bootstrap"]],
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                              text=True, timeout=600, check=False)

    orders = run("orders")
    assert orders.returncode == 0, orders.stderr[-3000:]
    assert "16 windows written" in orders.stdout and "(80 of 120 events;" in orders.stdout
    assert "15 registrations from" in orders.stdout and "next: bash bin/spark-example replay" in orders.stdout
    assert len(list(tmp_path.glob("spark-example-data/*/run.json"))) == 1
    replay = run("replay")
    assert replay.returncode == 0, replay.stdout + replay.stderr[-3000:]
    assert replay.stdout.strip().endswith("8 windows equal to the live run's, 0 different, 0 not written by the live run")


def test_an_example_without_a_broker_says_so_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spark_examples.run", "orders", "--bootstrap", "127.0.0.1:1"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "no broker answers at 127.0.0.1:1 ([Errno 111] Connection refused); start one with `bash bin/serve`"]
