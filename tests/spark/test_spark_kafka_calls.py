"""Gregor answers every call Spark 4.x's Kafka source and sink make, in Spark's order.

Runs whether or not Spark's connector jar (spark-sql-kafka-0-10) is on this machine: the calls are
made with the Java kafka-clients that Spark ships, in a py4j JVM (tests/spark/kafka_jvm.py), through
the mirrors in tests/spark/spark_calls.py, each of which names the Spark source file it follows.
"""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

from tests.spark.kafka_jvm import kafka_jvm
from tests.spark.spark_calls import (
    ExecutorReader,
    OffsetOutOfRange,
    SinkWriter,
    assigned_partitions,
    list_offsets,
    offsets_for_timestamp,
)

pytestmark = pytest.mark.spark

BASE_TS = 1_700_000_000_000
ROUND_MS = 60_000


@pytest.fixture
def jvm(bootstrap, tmp_path):
    with kafka_jvm(bootstrap, tmp_path / "jvm") as j:
        yield j


@pytest.fixture
def admin(jvm):
    a = jvm.admin()
    yield a
    a.close()


def create_topic(jvm, admin, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    new_topic = jvm.kafka.clients.admin.NewTopic(topic, partitions, jvm.jvm.java.lang.Short.valueOf("1"))
    if configs:
        new_topic.configs(configs)
    admin.createTopics([new_topic]).all().get()


def event(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    tag = b"user.registered" if i % 3 == 0 else b"order.paid"
    return f"user-{i % 7}".encode(), f'{{"seq": {i}}}'.encode(), [("tag", tag), ("seq", str(i).encode())]


def write_rounds(jvm, topic: str, partitions: int, rounds: int, per_round: int) -> list[tuple[int, int]]:
    """Round r's records carry CreateTime BASE_TS + r * ROUND_MS + i (the sink's timestamp column)."""
    sink = SinkWriter(jvm)
    for r in range(rounds):
        for i in range(per_round):
            key, value, headers = event(r * per_round + i)
            sink.send(topic, key, value, headers, partition=i % partitions, timestamp_ms=BASE_TS + r * ROUND_MS + i)
    return sink.close()


def test_driver_describes_topic_and_lists_earliest_and_latest_offsets(jvm, admin, topic_name):
    create_topic(jvm, admin, topic_name, 3)
    sink = SinkWriter(jvm)
    for i in range(35):
        key, value, headers = event(i)
        sink.send(topic_name, key, value, headers, partition=0 if i < 10 else 2)
    sink.close()

    partitions = assigned_partitions(jvm, admin, [topic_name])
    assert partitions == [(topic_name, 0), (topic_name, 1), (topic_name, 2)]
    earliest = list_offsets(jvm, admin, {tp: "earliest" for tp in partitions})
    latest = list_offsets(jvm, admin, {tp: "latest" for tp in partitions})
    assert {tp: o for tp, (o, _) in earliest.items()} == {tp: 0 for tp in partitions}
    assert {tp[1]: o for tp, (o, _) in latest.items()} == {0: 10, 1: 0, 2: 25}


def test_starting_and_ending_timestamps_resolve_to_each_rounds_first_offset(jvm, admin, topic_name):
    create_topic(jvm, admin, topic_name, 2)
    write_rounds(jvm, topic_name, partitions=2, rounds=3, per_round=20)  # 10 per partition per round
    partitions = assigned_partitions(jvm, admin, [topic_name])

    for r in range(3):
        for ts in (BASE_TS + r * ROUND_MS, BASE_TS + r * ROUND_MS - 30_000):
            assert offsets_for_timestamp(jvm, admin, partitions, ts, starting=True) == {
                tp: 10 * r for tp in partitions
            }
    # Mid-round: partition 0 holds i = 0, 2, 4, ... so i >= 5 starts at its 4th record (i = 6).
    found = list_offsets(jvm, admin, {tp: BASE_TS + ROUND_MS + 5 for tp in partitions})
    assert found == {(topic_name, 0): (13, BASE_TS + ROUND_MS + 6), (topic_name, 1): (12, BASE_TS + ROUND_MS + 5)}
    # endingTimestamp after the last record: no match, which Spark turns into "latest".
    after = BASE_TS + 3 * ROUND_MS
    assert list_offsets(jvm, admin, {tp: after for tp in partitions}) == {tp: (-1, -1) for tp in partitions}
    assert offsets_for_timestamp(jvm, admin, partitions, after, starting=False) == {tp: 30 for tp in partitions}
    with pytest.raises(ValueError, match="No offset matched"):
        offsets_for_timestamp(jvm, admin, partitions, after, starting=True)


def test_executor_reads_exactly_an_offset_range_that_starts_mid_batch(jvm, admin, topic_name):
    create_topic(jvm, admin, topic_name, 1)
    write_rounds(jvm, topic_name, partitions=1, rounds=1, per_round=50)
    reader = ExecutorReader(jvm, topic_name, 0)
    try:
        records = reader.read(17, 42)
    finally:
        reader.close()
    assert [r.offset for r in records] == list(range(17, 42))
    assert [(r.key, r.value, r.headers) for r in records] == [
        (k, v, h) for k, v, h in (event(i) for i in range(17, 42))
    ]
    assert [r.timestamp for r in records] == [BASE_TS + i for i in range(17, 42)]
    # Every poll was followed by seekToBeginning/seekToEnd, which saw the whole partition.
    assert reader.polls and all((p.earliest, p.latest) == (0, 50) for p in reader.polls)
    assert reader.polls[0].requested == 17 and reader.polls[0].offset_after_poll > 17


def test_microbatches_read_what_was_added_between_two_latest_offset_calls(jvm, admin, topic_name):
    create_topic(jvm, admin, topic_name, 2)
    partitions = assigned_partitions(jvm, admin, [topic_name])
    start = {tp: o for tp, (o, _) in list_offsets(jvm, admin, {tp: "earliest" for tp in partitions}).items()}
    write_rounds(jvm, topic_name, partitions=2, rounds=1, per_round=8)
    first = {tp: o for tp, (o, _) in list_offsets(jvm, admin, {tp: "latest" for tp in partitions}).items()}
    write_rounds(jvm, topic_name, partitions=2, rounds=1, per_round=6)
    second = {tp: o for tp, (o, _) in list_offsets(jvm, admin, {tp: "latest" for tp in partitions}).items()}
    assert first == {tp: 4 for tp in partitions} and second == {tp: 7 for tp in partitions}

    batches = []
    for lower, upper in ((start, first), (first, second)):
        rows = []
        for tp in partitions:
            reader = ExecutorReader(jvm, *tp)
            try:
                rows += [(tp[1], r.offset) for r in reader.read(lower[tp], upper[tp])]
            finally:
                reader.close()
        batches.append(sorted(rows))
    assert batches == [
        [(p, o) for p in (0, 1) for o in range(4)],
        [(p, o) for p in (0, 1) for o in range(4, 7)],
    ]


def test_executor_offset_past_the_end_fails_as_out_of_range_without_reset(jvm, admin, topic_name):
    create_topic(jvm, admin, topic_name, 1)
    write_rounds(jvm, topic_name, partitions=1, rounds=1, per_round=5)
    reader = ExecutorReader(jvm, topic_name, 0, poll_timeout_ms=1_000)
    try:
        with pytest.raises((Py4JJavaError, OffsetOutOfRange)) as caught:
            reader.fetch(9)
        if isinstance(caught.value, Py4JJavaError):
            assert caught.value.java_exception.getClass().getName().endswith("OffsetOutOfRangeException")
        assert reader.available_offset_range() == (0, 5)
    finally:
        reader.close()


def test_sink_producer_is_idempotent_acks_all_and_keeps_keys_values_and_headers(jvm, admin, topic_name, tmp_path):
    create_topic(jvm, admin, topic_name, 2)
    sink = SinkWriter(jvm)
    headers = [("tag", b"order.paid"), ("trace", b""), ("tag", b"duplicate-name"), ("seq", b"x")]
    for i in range(60):
        sink.send(topic_name, f"k{i}".encode() if i % 5 else None, f"v{i}".encode(), headers[: i % 5])
    acked = sink.close()
    assert len(acked) == 60
    per_partition: dict[int, list[int]] = {}
    for partition, offset in acked:
        per_partition.setdefault(partition, []).append(offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())
    assert "ProducerId set to" in (tmp_path / "jvm" / "jvm.log").read_text()  # InitProducerId succeeded

    got = {}
    for partition, offsets in per_partition.items():
        reader = ExecutorReader(jvm, topic_name, partition)
        try:
            got.update({r.value: r for r in reader.read(0, len(offsets))})
        finally:
            reader.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(60))
    for i in range(60):
        record = got[f"v{i}".encode()]
        assert record.key == (f"k{i}".encode() if i % 5 else None)
        assert record.headers == headers[: i % 5]


def create_view_or_skip(jvm, admin, view: str, source: str, tags: str) -> None:
    try:
        create_topic(jvm, admin, view, 1, {"view.source": source, "view.tags": tags})
    except Py4JJavaError as e:
        pytest.skip(f"this Gregor cannot create tag-filtered views (CreateTopics view.source/view.tags): "
                    f"{e.java_exception.toString()}")


def test_executor_reads_a_tag_view_to_its_end_even_when_the_tail_does_not_match(jvm, admin, topic_name):
    source, view = topic_name, f"{topic_name}-orders"
    create_topic(jvm, admin, source, 1, {"tag.header": "tag"})
    create_view_or_skip(jvm, admin, view, source, "order.paid")
    write_rounds(jvm, source, partitions=1, rounds=1, per_round=30)  # i % 3 == 0 is user.registered
    sink = SinkWriter(jvm)
    for i in range(5):  # a tail of non-matching records: Spark must still reach `latest`
        sink.send(source, b"user-x", f"tail-{i}".encode(), [("tag", b"user.registered")])
    sink.close()

    partitions = assigned_partitions(jvm, admin, [view])
    earliest = list_offsets(jvm, admin, {tp: "earliest" for tp in partitions})
    latest = list_offsets(jvm, admin, {tp: "latest" for tp in partitions})
    assert (earliest[(view, 0)][0], latest[(view, 0)][0]) == (0, 35)
    reader = ExecutorReader(jvm, view, 0, poll_timeout_ms=3_000)
    try:
        records = reader.read(0, 35)
        # A micro-batch holding only non-matching records: the poll must still move the position.
        tail = reader.read(30, 35)
    finally:
        reader.close()
    assert [r.offset for r in records] == [i for i in range(30) if i % 3]
    assert all(r.headers[0] == ("tag", b"order.paid") for r in records)
    assert tail == [] and reader.polls[-1].offset_after_poll == 35
