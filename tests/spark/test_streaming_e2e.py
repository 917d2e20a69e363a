"""Structured Streaming on Spark's real Kafka connector (spark-sql-kafka-0-10, from Maven Central)
against a Gregor started by the test: the source's options a pipeline uses, the Kafka sink, the
file sink's exactly-once restart from a checkpoint, a view's offset gaps, a topic gaining
partitions and a broker killed under a running stream. (test_spark_against_kafka.py runs a pipeline on
both Gregor and Kafka, and a job on a missing topic.) Each test checks the output record by
record: (partition, offset) pairs, keys, values and headers, no more and no fewer."""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from pyspark.sql import functions as F

from spark_examples.topics import create_view, ensure_topic
from tests.kit.gregor import start_broker
from tests.spark.streams import numbered, produce, read_all, rows, source, unique
from tests.kit.wait import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("kafka_connector")]

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false",
            "log.cleaner.backoff.ms": "500"}  # the compacted topic's test: the cleaner runs twice a second


@pytest.fixture(scope="module")
def broker(kafka_connector, tmp_path_factory):
    process = start_broker(tmp_path_factory.mktemp("spark-streaming"), **SETTINGS)
    yield process
    process.stop()


def test_stream_reads_transforms_and_writes_back_through_the_kafka_sink(broker, spark, tmp_path):
    """readStream with includeHeaders → a transformation → writeStream.format("kafka"): every input
    record arrives once in the output topic with its key, the transformed value, its headers and
    one added header."""
    src, out = unique("sink-in"), unique("sink-out")
    ensure_topic(broker.bootstrap, src, 3)
    ensure_topic(broker.bootstrap, out, 2)
    records = numbered(3, 300)
    produce(broker.bootstrap, src, records)

    transformed = source(spark, broker.bootstrap, src, includeHeaders="true").select(
        "key",
        F.upper(F.col("value").cast("string")).alias("value"),
        F.concat("headers", F.array(F.struct(
            F.lit("from").alias("key"), F.concat_ws("/", F.col("partition").cast("string"), F.col("offset").cast("string")).cast("binary").alias("value")))).alias("headers"),
    )
    query = (transformed.writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", out).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "availableNow query did not finish in 180 s"
    assert query.exception() is None

    got = sorted((k, v, [(hk, hv) for hk, hv in h]) for _, _, k, v, h in read_all(broker.bootstrap, out, 2))
    source_offsets = {value: (p, o) for p, o, _, value, _ in read_all(broker.bootstrap, src, 3)}
    expected = sorted((k, v.upper(), [*h, ("from", "{}/{}".format(*source_offsets[v]).encode())]) for _, k, v, h in records)
    assert len(got) == 300 and got == expected


def test_restart_from_the_checkpoint_neither_loses_nor_repeats_output(broker, spark, tmp_path):
    """A file-sink query with maxOffsetsPerTrigger is stopped after a few micro-batches, more records
    arrive, and a new query on the same checkpoint resumes: the sink holds every record exactly
    once, and no micro-batch read more than maxOffsetsPerTrigger records."""
    topic = unique("restart")
    ensure_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, numbered(3, 600))
    path, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(trigger: dict):
        stream = source(spark, broker.bootstrap, topic, maxOffsetsPerTrigger="30").select(
            "partition", "offset", F.col("value").cast("string").alias("value"))
        return (stream.writeStream.format("parquet").option("path", path).option("checkpointLocation", checkpoint)
                .trigger(**trigger).start())

    first = start({"processingTime": "100 milliseconds"})
    wait_until(lambda: sum(1 for p in first.recentProgress if p["numInputRows"] > 0) >= 3, 120, "three micro-batches", interval=0.5)
    first.stop()
    first_progress = list(first.recentProgress)
    written_first = spark.read.parquet(path).count()
    assert 90 <= written_first < 600, "the first query should stop part-way through the topic"

    produce(broker.bootstrap, topic, numbered(3, 150, start=600))
    second = start({"availableNow": True})
    assert second.awaitTermination(300), "the resumed query did not finish in 300 s"
    assert second.exception() is None

    output = rows(spark.read.parquet(path))
    assert len(output) == len({(p, o) for p, o, _ in output}) == 750  # nothing repeated, nothing lost
    assert sorted(v for _, _, v in output) == sorted(f"v{i}" for i in range(750))
    assert {(p, o, v.encode()) for p, o, v in output} == {(p, o, v) for p, o, _, v, _ in read_all(broker.bootstrap, topic, 3)}
    batches = [p["numInputRows"] for p in first_progress + list(second.recentProgress)]
    assert max(batches) <= 30 and sum(batches) >= 750 - written_first


def test_batch_read_with_min_partitions_splits_the_offset_ranges(broker, spark):
    topic = unique("min-partitions")
    ensure_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, numbered(2, 200))
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
          .option("minPartitions", "8").load())
    assert df.rdd.getNumPartitions() >= 8
    assert rows(df) == sorted((p, o, v.decode()) for p, o, _, v, _ in read_all(broker.bootstrap, topic, 2))


def test_group_id_prefix_names_the_group_spark_joins(broker, spark, tmp_path):
    """With consumer-based offset fetching (spark.sql.streaming.kafka.useDeprecatedOffsetFetching),
    the driver joins a consumer group named from groupIdPrefix through Gregor's group coordinator;
    the stream reads every record while it is a member."""
    topic, prefix = unique("group-prefix"), unique("gregor-spark")
    ensure_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, numbered(2, 50))
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    query = None
    try:
        query = (source(spark, broker.bootstrap, topic, groupIdPrefix=prefix).select("partition", "offset", "value")
                 .writeStream.format("memory").queryName(prefix.replace("-", "_"))
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="200 milliseconds").start())
        table = prefix.replace("-", "_")
        wait_until(lambda: spark.sql(f"select count(*) from {table}").first()[0] == 50, 120, "50 rows in the memory sink", interval=0.5)
        groups = [g["group_id"] if isinstance(g, dict) else g[0] for g in admin.list_groups()]
        ours = [g for g in groups if g.startswith(prefix + "-")]
        assert ours and all(g.endswith("driver-0") for g in ours), groups
        assert rows(spark.table(table)) == sorted((p, o, v.decode()) for p, o, _, v, _ in read_all(broker.bootstrap, topic, 2))
    finally:
        if query is not None:
            query.stop()
        admin.close()
        spark.conf.unset("spark.sql.streaming.kafka.useDeprecatedOffsetFetching")


def test_a_topic_gaining_partitions_while_the_stream_runs(broker, spark, tmp_path):
    """CreatePartitions under a running query: the next micro-batch finds the new partitions and
    reads them from their first offset."""
    topic = unique("grow")
    ensure_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, numbered(2, 20))
    table = topic.replace("-", "_")
    query = (source(spark, broker.bootstrap, topic).select("partition", "offset", "value")
             .writeStream.format("memory").queryName(table).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        count = lambda: spark.sql(f"select count(*) from {table}").first()[0]
        wait_until(lambda: count() == 20, 120, "the first 20 records", interval=0.5)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_partitions({topic: 4})
        finally:
            admin.close()
        produce(broker.bootstrap, topic, [(p, None, f"new{i}".encode(), []) for i, p in enumerate([2, 3] * 10)])
        wait_until(lambda: count() == 40, 120, "40 records, 20 of them in the new partitions", interval=0.5)
        assert query.exception() is None
        got = rows(spark.table(table))
        assert got == sorted((p, o, v.decode()) for p, o, _, v, _ in read_all(broker.bootstrap, topic, 4))
        assert {p for p, _, _ in got} == {0, 1, 2, 3}
    finally:
        query.stop()


def test_a_view_streams_with_fail_on_data_loss_true(broker, spark, tmp_path):
    """A tag-filtered view's offsets are its source's, with gaps where records of other tags lie.
    Spark's source treats a gap above the log start offset as invisible records (as in a compacted
    or transactional topic), not as data loss, so failOnDataLoss keeps its default, true: the query
    reads exactly the matching records at their source offsets, including micro-batch ends that fall
    inside a gap and a trailing run of unmatched records."""
    src = unique("view-source")
    view = src + "-coupons"
    ensure_topic(broker.bootstrap, src, 2, {"tag.header": "tag"})
    tags = ["other", "other", "coupon", "other", "coupon", "coupon", "other", "other", "other"]
    records = [(i % 2, f"k{i}".encode(), f"v{i}".encode(), [("tag", tags[i % len(tags)].encode())]) for i in range(90)]
    records += [(i % 2, None, f"tail{i}".encode(), [("tag", b"other")]) for i in range(10)]
    produce(broker.bootstrap, src, records)
    create_view(broker.bootstrap, view, src, ["coupon"])
    table = view.replace("-", "_")
    query = (source(spark, broker.bootstrap, view, failOnDataLoss="true", maxOffsetsPerTrigger="7")
             .select("partition", "offset", "value").writeStream.format("memory").queryName(table)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(300), "availableNow query over the view did not finish in 300 s"
    assert query.exception() is None
    expected = sorted((p, o, v.decode()) for p, o, _, v, h in read_all(broker.bootstrap, src, 2) if h == [("tag", b"coupon")])
    assert len(expected) == 30 and rows(spark.table(table)) == expected


def test_a_compacted_topic_streams_its_latest_values_with_fail_on_data_loss_true(broker, spark, tmp_path):
    """After the log cleaner ran, a compacted topic holds the latest value of each key at its
    original offset and gaps elsewhere; Spark's source reads it with failOnDataLoss=true and
    micro-batches that end inside gaps, and gets exactly what a consumer gets."""
    topic = unique("compacted")
    ensure_topic(broker.bootstrap, topic, 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    for round_ in range(5):  # several produce requests: all but each partition's last batch get cleaned
        produce(broker.bootstrap, topic, [(k % 2, f"k{k}".encode(), f"v{round_}".encode(), []) for k in range(20)])
    wait_until(lambda: len(read_all(broker.bootstrap, topic, 2)) <= 40, 60, "the cleaner compacted the topic", interval=0.5)
    expected = sorted((p, o, v.decode()) for p, o, _, v, _ in read_all(broker.bootstrap, topic, 2))
    latest = {k: v for _, _, k, v, _ in read_all(broker.bootstrap, topic, 2)}
    assert latest == {f"k{k}".encode(): b"v4" for k in range(20)}
    table = topic.replace("-", "_")
    query = (source(spark, broker.bootstrap, topic, failOnDataLoss="true", maxOffsetsPerTrigger="7")
             .select("partition", "offset", F.col("value").cast("string").alias("value"))
             .writeStream.format("memory").queryName(table)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(300), "availableNow query over the compacted topic did not finish in 300 s"
    assert query.exception() is None
    assert rows(spark.table(table)) == expected and len(expected) < 100


def _transactions(bootstrap: str, topic: str, outcomes: list[bool], per_txn: int = 10) -> list[str]:
    """One transactional producer writes `per_txn` records per transaction to partitions 0 and 1,
    committing or aborting each as `outcomes` says; returns the committed values."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("spark-txn")})
    producer.init_transactions(30)
    committed = []
    for t, commit in enumerate(outcomes):
        producer.begin_transaction()
        values = [f"t{t}-{i}" for i in range(per_txn)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), partition=i % 2)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    return committed


def test_read_committed_streams_skip_aborted_transactions(broker, spark, tmp_path):
    """kafka.isolation.level=read_committed (issue 19): Spark's source reads committed
    transactions only; the aborted records and the markers are offsets it steps over, with
    failOnDataLoss=true. read_uncommitted sees the aborted records too."""
    topic = unique("txn")
    ensure_topic(broker.bootstrap, topic, 2)
    committed = _transactions(broker.bootstrap, topic, [True, False, True, False, True])
    for isolation, wanted in (("read_committed", sorted(committed)), ("read_uncommitted", None)):
        table = f"{topic}_{isolation}".replace("-", "_")
        query = (source(spark, broker.bootstrap, topic, failOnDataLoss="true", maxOffsetsPerTrigger="7",
                        **{"kafka.isolation.level": isolation})
                 .select("partition", "offset", F.col("value").cast("string").alias("value"))
                 .writeStream.format("memory").queryName(table)
                 .option("checkpointLocation", str(tmp_path / isolation)).trigger(availableNow=True).start())
        assert query.awaitTermination(300), f"availableNow {isolation} query did not finish in 300 s"
        assert query.exception() is None
        values = sorted(v for _, _, v in rows(spark.table(table)))
        if wanted is not None:
            assert values == wanted
        else:
            assert len(values) == 50 and set(committed) < set(values)


def test_a_broker_killed_under_a_running_stream_loses_nothing(spark, tmp_path):
    """SIGKILL of the broker while a file-sink query runs, a restart on the same port and data dir,
    and more records: the query keeps running and its output holds every record exactly once."""
    process = start_broker(tmp_path, **SETTINGS)
    try:
        process.port = int(process.bootstrap.rsplit(":", 1)[1])
        topic = unique("killed")
        ensure_topic(process.bootstrap, topic, 2)
        produce(process.bootstrap, topic, numbered(2, 100))
        path = str(tmp_path / "out")
        query = (source(spark, process.bootstrap, topic).select("partition", "offset", F.col("value").cast("string").alias("value"))
                 .writeStream.format("parquet").option("path", path).option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="500 milliseconds").start())
        try:
            wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 100, 120, "the first 100 records", interval=0.5)
            process.stop(signal.SIGKILL)
            time.sleep(2)  # time passing on purpose: a few triggers fire against no broker
            process.start()
            produce(process.bootstrap, topic, numbered(2, 100, start=100))
            wait_until(lambda: spark.read.parquet(path).count() >= 200, 180, "200 records after the restart", interval=0.5)
            assert query.isActive and query.exception() is None
        finally:
            query.stop()
        output = rows(spark.read.parquet(path))
        assert len(output) == 200 and sorted(v for _, _, v in output) == sorted(f"v{i}" for i in range(200))
        assert {(p, o, v.encode()) for p, o, v in output} == {(p, o, v) for p, o, _, v, _ in read_all(process.bootstrap, topic, 2)}
    finally:
        process.stop()
