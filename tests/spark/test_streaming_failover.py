"""A Structured Streaming query on Spark's Kafka connector survives the failover of a 3-node
broker group: the master is SIGKILLed while a file-sink query runs, a follower takes over, more
records arrive, and the output holds every record exactly once with failOnDataLoss=true."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.cluster.conftest import broker_group, zookeeper  # noqa: F401 - fixtures of the cluster tests
from tests.cluster.load import create_topic
from tests.spark.streams import numbered, produce, read_all, rows, source, unique
from tests.kit.wait import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.crash, pytest.mark.usefixtures("kafka_connector")]


def test_a_stream_keeps_running_across_the_failover_of_its_broker_group(spark, tmp_path, broker_group):  # noqa: F811
    group = broker_group(3)
    topic = unique("failover")
    create_topic(group, topic, partitions=2)
    produce(group.bootstrap, topic, numbered(2, 100))
    path = str(tmp_path / "out")
    query = (source(spark, group.bootstrap, topic, failOnDataLoss="true")
             .select("partition", "offset", F.col("value").cast("string").alias("value"))
             .writeStream.format("parquet").option("path", path).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 100, 120, "the first 100 records", interval=0.5)
        old = group.master()
        group.kill(old)
        group.master(other_than=old)
        produce(group.bootstrap, topic, numbered(2, 100, start=100))
        wait_until(lambda: spark.read.parquet(path).count() >= 200, 180, "200 records after the failover", interval=0.5)
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    output = rows(spark.read.parquet(path))
    assert len(output) == 200 and sorted(v for _, _, v in output) == sorted(f"v{i}" for i in range(200))
    assert {(p, o, v.encode()) for p, o, v in output} == {(p, o, v) for p, o, _, v, _ in read_all(group.bootstrap, topic, 2)}
