"""The examples' Spark transformations on Kafka-source-shaped rows, without the Kafka connector:
exact aggregates in batch, and exactly the closed windows from a watermarked streaming query."""

from __future__ import annotations

import pytest

from spark_examples.events import WINDOW_MS, closed_windows, expected_aggregates, generate_round
from spark_examples.pipeline import AGGREGATE_COLUMNS, parse_events, window_aggregates
from spark_examples.replay_window import compare
from spark_examples.windowed_aggregates import start
from tests.spark.kafka_rows import KAFKA_SOURCE_SCHEMA, kafka_rows

pytestmark = pytest.mark.spark

START_MS = 1_767_225_600_000


def as_dict(rows) -> dict[tuple[int, str], tuple[int, int, int]]:
    return {(r["window_start_ms"], r["type"]): (r["events"], r["amount_cents"], r["max_amount_cents"]) for r in rows}


def test_batch_aggregates_equal_the_reference_computation(spark):
    events = [e for r in range(2) for e in generate_round(r, 40, START_MS, 2, seed=7)]
    frame = spark.createDataFrame(kafka_rows(events), KAFKA_SOURCE_SCHEMA)
    parsed = parse_events(frame)
    assert parsed.count() == 80
    assert {r["tag"] for r in parsed.select("tag").distinct().collect()} == {
        "user.registered", "order.created", "order.paid", "order.closed"
    }
    rows = window_aggregates(parsed, watermark_delay=None).collect()
    expected = expected_aggregates(events)
    assert len(rows) == len(expected) == 16  # 4 minutes x 4 event types
    assert as_dict(rows) == expected
    assert all(r["window_end_ms"] - r["window_start_ms"] == WINDOW_MS for r in rows)
    assert sum(r["events"] for r in rows) == 80


def test_streaming_with_watermark_emits_exactly_the_closed_windows_once(spark, tmp_path):
    """Three rounds arrive as three files, one micro-batch each; append mode emits a window once the
    watermark (max event time - 1 minute) passes its end, so the last round's windows stay open."""
    rounds = [generate_round(r, 40, START_MS, 2, seed=3) for r in range(3)]
    source = tmp_path / "source"
    for r, events in enumerate(rounds):
        spark.createDataFrame(kafka_rows(events), KAFKA_SOURCE_SCHEMA).coalesce(1).write.parquet(
            str(source / f"round={r}")
        )
    raw = spark.readStream.schema(KAFKA_SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).parquet(
        str(source / "round=*")
    )
    out = tmp_path / "aggregates"

    def write_batch(batch, batch_id):
        batch.select(*AGGREGATE_COLUMNS).write.mode("append").parquet(str(out))

    query = start(raw, write_batch, str(tmp_path / "checkpoint"), watermark="1 minute", available_now=True)
    assert query.awaitTermination(180), "availableNow query did not finish in 180 s"
    assert query.exception() is None

    all_events = [e for events in rounds for e in events]
    expected = closed_windows(expected_aggregates(all_events), max(e.event_time_ms for e in all_events), 60_000)
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == len(expected) == 16  # rounds 0 and 1: 4 minutes x 4 types; round 2 still open
    assert as_dict(rows) == expected


def test_replay_comparison_reports_equal_different_and_unknown_windows():
    row = {"window_start_ms": 0, "window_end_ms": 60_000, "type": "order.paid", "events": 3,
           "amount_cents": 900, "max_amount_cents": 500}
    changed = {**row, "amount_cents": 901}
    later = {**row, "window_start_ms": 60_000, "window_end_ms": 120_000}
    result = compare([row, later], [row])
    assert (result.equal, result.different, result.not_in_live_run, result.ok) == ([row], [], [later], False)
    result = compare([changed], [row])
    assert result.different == [(changed, row)] and not result.ok
    assert compare([row], [row]).ok
