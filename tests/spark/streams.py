"""What the Spark tests do around a stream: produce and read back records with kafka-python, a Kafka source on a topic, a query's rows sorted."""

from __future__ import annotations

import time
import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


Record = tuple[int, bytes, bytes, list]  # partition, key, value, headers


def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_in_flight_requests_per_connection=1)
    try:
        for partition, key, value, headers in records:
            producer.send(topic, key=key, value=value, headers=headers, partition=partition)
        producer.flush(60)
    finally:
        producer.close()


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes, bytes, list]]:
    """Every record of `topic` as (partition, offset, key, value, headers), read with kafka-python."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    end = consumer.end_offsets(tps)
    out = []
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for rs in consumer.poll(timeout_ms=1_000).values():
            out += [(r.partition, r.offset, r.key, r.value, list(r.headers)) for r in rs]
    consumer.close()
    return sorted(out)


def source(spark, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", topic).option("startingOffsets", "earliest")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df: DataFrame) -> list[tuple]:
    """(partition, offset, value) of Kafka source rows, sorted."""
    return sorted((r["partition"], r["offset"], r["value"]) for r in df.select("partition", "offset", F.col("value").cast("string").alias("value")).collect())


def numbered(topic_partitions: int, count: int, start: int = 0) -> list[Record]:
    return [(i % topic_partitions, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())])
            for i in range(start, start + count)]
