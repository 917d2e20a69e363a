"""Views through unchanged clients against a live Gregor: groups, assign(), refusals, deletes."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidConfigurationError, InvalidRequestError

pytestmark = pytest.mark.clients
TAGS = ["paid", "cancelled", "created", None, "shipped", "paid", "refunded", "other", "x", "y"]


def _create(bootstrap: str, topics: dict) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(topics)
    finally:
        admin.close()


def _source_and_view(bootstrap: str, name: str, partitions: int = 3) -> tuple[str, str]:
    source, view = f"{name}-src", f"{name}-view"
    _create(bootstrap, {source: {"num_partitions": partitions, "replication_factor": 1,
                                 "configs": {"tag.header": "tag"}}})
    _create(bootstrap, {view: {"configs": {"view.source": source, "view.tags": "paid,created"}}})
    return source, view


def _produce(bootstrap: str, source: str, count: int, *, compression: str | None = None,
             partitions: int = 3) -> set[bytes]:
    """Records with a rotating tag, then a long unmatched tail; returns the values a view must carry."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, compression_type=compression)
    expected = set()
    for i in range(count):
        tag = TAGS[i % len(TAGS)] if i < count - 300 else "tail"
        headers = [("tag", tag.encode())] if tag else []
        producer.send(source, value=b"v%d" % i, headers=headers, partition=i % partitions)
        if tag in ("paid", "created"):
            expected.add(b"v%d" % i)
    producer.flush(30)
    producer.close()
    return expected


def test_kafka_python_group_consuming_a_view_receives_exactly_the_matching_records(bootstrap, topic_name):
    source, view = _source_and_view(bootstrap, topic_name)
    expected = _produce(bootstrap, source, 3000, compression="gzip")
    consumer = KafkaConsumer(view, bootstrap_servers=bootstrap, group_id=f"g-{topic_name}",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    deadline = time.monotonic() + 40
    while len(got) < len(expected) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.commit()
    extra = consumer.poll(timeout_ms=1500)
    positions = {tp.partition: consumer.position(tp) for tp in consumer.assignment()}
    ends = consumer.end_offsets(list(consumer.assignment()))
    consumer.close()
    assert sorted(r.value for r in got) == sorted(expected)
    assert all(dict(r.headers)["tag"] in (b"paid", b"created") for r in got)
    assert not any(extra.values())
    assert positions == {tp.partition: end for tp, end in ends.items()}  # moved past the unmatched tail


def test_confluent_assign_reader_of_a_view_receives_exactly_the_matching_records(bootstrap, topic_name):
    source, view = _source_and_view(bootstrap, topic_name)
    expected = _produce(bootstrap, source, 3000)
    stats = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"a-{topic_name}",
                         "enable.auto.commit": False, "statistics.interval.ms": 200,
                         "stats_cb": lambda text: stats.append(json.loads(text))})
    consumer.assign([CTopicPartition(view, p, 0) for p in range(3)])
    got = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg)
        elif len(got) >= len(expected) and stats and _fetch_offsets(stats[-1], view) == [1000] * 3:
            break
    consumer.close()
    assert sorted(m.value() for m in got) == sorted(expected)
    assert _fetch_offsets(stats[-1], view) == [1000] * 3  # librdkafka fetches past the unmatched tail


def _fetch_offsets(stats: dict, topic: str) -> list[int]:
    partitions = stats["topics"].get(topic, {}).get("partitions", {})
    return [partitions[str(p)]["next_offset"] if str(p) in partitions else -1 for p in range(3)]


def test_producing_to_a_view_is_refused(bootstrap, topic_name):
    _, view = _source_and_view(bootstrap, topic_name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    with pytest.raises(InvalidRequestError, match="read-only view"):
        producer.send(view, b"x").get(timeout=10)
    producer.close()
    confluent = Producer({"bootstrap.servers": bootstrap})
    errors = []
    confluent.produce(view, b"x", on_delivery=lambda err, msg: errors.append(err))
    confluent.flush(10)
    assert errors and errors[0].code() == 42  # INVALID_REQUEST


def test_a_view_of_a_source_without_tag_header_is_refused_with_invalid_config(bootstrap, topic_name):
    _create(bootstrap, {topic_name: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidConfigurationError, match="has no tag.header config"):
        _create(bootstrap, {f"{topic_name}-v": {"configs": {"view.source": topic_name, "view.tags": "a"}}})


def test_deleting_a_source_deletes_its_views(bootstrap, topic_name):
    source, view = _source_and_view(bootstrap, topic_name, partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert {view, source} <= set(admin.list_topics())
        admin.delete_topics([source])
        assert not {view, source} & set(admin.list_topics())
    finally:
        admin.close()


def test_a_view_mirrors_the_source_partitions_and_offsets(bootstrap, topic_name):
    source, view = _source_and_view(bootstrap, topic_name, partitions=2)
    _produce(bootstrap, source, 400, partitions=2)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    assert consumer.partitions_for_topic(view) == {0, 1}
    tps = [TopicPartition(view, p) for p in range(2)]
    sources = [TopicPartition(source, p) for p in range(2)]
    assert list(consumer.end_offsets(tps).values()) == list(consumer.end_offsets(sources).values())
    consumer.close()
