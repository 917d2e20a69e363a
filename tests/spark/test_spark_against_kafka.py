"""One Spark pipeline against Gregor and against a real Apache Kafka 3.9.0, on the same input, with
the outputs compared row for row: the source rows Spark reads (partition, offset, key, value,
headers, timestamp), and the example's windowed aggregation (streaming, watermark, foreachBatch
to Spark's Kafka sink and to parquet). Also what a job on a topic that does not exist gets from
each broker: the same Spark error, promptly.

Kafka's outputs are committed in recorded/kafka_pipeline.json: per push, where Kafka's cell is
answered by its recorded verdict (tests/kit/verdicts.py), Gregor's outputs are compared with them;
a live Kafka run re-records them, and in the full tier a change fails the run."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from kafka import KafkaProducer
from pyspark.sql import DataFrame

from spark_examples import windowed_aggregates
from spark_examples.events import closed_windows, expected_aggregates, generate_round
from spark_examples.topics import ensure_topic
from tests.kit.tier import FULL
from tests.kit.both import GREGOR, KAFKA, started
from tests.spark.streams import read_all

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("kafka_connector")]

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false"}
SOURCE, OUTPUT, PARTITIONS = "orders", "order-aggregates", 3
EVENTS = [e for r in range(3) for e in generate_round(r, 40, 1_767_225_600_000, 2, 5)]


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, kafka_connector, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), SETTINGS) as process:
        yield request.param, process.bootstrap


RESULTS: dict[str, dict] = {}  # broker -> what the pipeline produced there
RECORDED = Path(__file__).resolve().parent / "recorded" / "kafka_pipeline.json"  # Kafka's, from a live run


def _bytes_as_hex(value):
    if isinstance(value, (bytes, bytearray)):
        return {"hex": bytes(value).hex()}
    raise TypeError(f"not JSON: {type(value).__name__}")


def canonical(results: dict) -> dict:
    """The pipeline's outputs as JSON holds them (tuples as lists, bytes as hex), to compare and record."""
    return json.loads(json.dumps(results, default=_bytes_as_hex, sort_keys=True))


def _record_kafkas(results: dict) -> None:
    """Kafka's outputs from a live run become the recording; in the full tier a change is drift."""
    live = canonical(results)
    before = json.loads(RECORDED.read_text()) if RECORDED.exists() else None
    if live != before:
        RECORDED.parent.mkdir(exist_ok=True)
        RECORDED.write_text(json.dumps(live, indent=1, sort_keys=True) + "\n")
        assert before is None or not FULL, f"Kafka's outputs differ from {RECORDED.name}: re-recorded, see git diff"


def source_rows(df: DataFrame) -> list[tuple]:
    return sorted((r["partition"], r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]],
                   r["timestamp"].timestamp()) for r in df.collect())


def test_pipeline_runs_on_each_broker(broker, spark, tmp_path):
    """The same input (explicit partitions and CreateTime timestamps) and the same jobs."""
    name, bootstrap = broker
    ensure_topic(bootstrap, SOURCE, PARTITIONS)
    ensure_topic(bootstrap, OUTPUT, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_in_flight_requests_per_connection=1)
    for i, e in enumerate(EVENTS):
        producer.send(SOURCE, key=e.key(), value=e.value(), headers=e.headers(), partition=i % PARTITIONS,
                      timestamp_ms=e.event_time_ms)
    producer.flush(60)
    producer.close()

    batch = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", SOURCE)
             .option("includeHeaders", "true").load())
    parquet = str(tmp_path / "aggregates")
    query = windowed_aggregates.start(windowed_aggregates.kafka_source(spark, bootstrap, SOURCE),
                                      windowed_aggregates.kafka_and_parquet_writer(bootstrap, OUTPUT, parquet),
                                      str(tmp_path / "checkpoint"))
    assert query.awaitTermination(300), "availableNow query did not finish in 300 s"
    assert query.exception() is None
    RESULTS[name] = {
        "source": source_rows(batch),
        "aggregates": windowed_aggregates.read_results(spark, parquet),
        "output": sorted((k, v, h) for _, _, k, v, h in read_all(bootstrap, OUTPUT, 1)),
    }
    expected = closed_windows(expected_aggregates(EVENTS), max(e.event_time_ms for e in EVENTS), 60_000)
    if name == KAFKA:
        _record_kafkas(RESULTS[name])
    assert len(RESULTS[name]["source"]) == len(EVENTS) == 120
    assert {(r["window_start_ms"], r["type"]): (r["events"], r["amount_cents"], r["max_amount_cents"])
            for r in RESULTS[name]["aggregates"]} == expected


def test_outputs_are_equal_row_for_row():
    """Gregor's outputs against Kafka's from this run, or (Kafka's cell answered by its verdict) recorded."""
    if GREGOR not in RESULTS:
        pytest.fail("the pipeline did not run on Gregor: see test_pipeline_runs_on_each_broker")
    if KAFKA not in RESULTS and not RECORDED.exists():
        pytest.fail(f"the pipeline did not run on Kafka and {RECORDED} is missing")
    gregor = canonical(RESULTS[GREGOR])
    kafka = canonical(RESULTS[KAFKA]) if KAFKA in RESULTS else json.loads(RECORDED.read_text())
    assert gregor["source"] == kafka["source"]
    assert gregor["aggregates"] == kafka["aggregates"] and len(gregor["aggregates"]) == 16
    assert gregor["output"] == kafka["output"] and len(gregor["output"]) == 16


def _collect_within(df: DataFrame, timeout: float) -> dict:
    """df.collect() in a thread: its rows or its exception, or AssertionError if it hangs."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["rows"] = df.collect()
        except Exception as e:  # noqa: BLE001 - the error is what the test looks at
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"Spark did not answer within {timeout:.0f} s"
    return outcome


@pytest.mark.parametrize("option, value, outcome", [
    ("subscribe", "no-such-topic", "UnknownTopicOrPartitionException"),
    ("assign", '{"no-such-topic":[0]}', "UnknownTopicOrPartitionException"),
    ("subscribePattern", "no-such-topic.*", "no rows"),
])
def test_a_job_on_a_topic_that_does_not_exist_gets_sparks_answer_not_a_hang(broker, spark, option, value, outcome):
    """A batch job naming a missing topic fails with Spark's error carrying the broker's
    UNKNOWN_TOPIC_OR_PARTITION (after Spark's own offset-fetch retries), on Gregor as on Kafka; a
    pattern that matches nothing reads nothing."""
    _, bootstrap = broker
    df = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(option, value).load()
    got = _collect_within(df, 180)
    if outcome == "no rows":
        assert got == {"rows": []}
    else:
        assert "error" in got and outcome in str(got["error"]), got
