"""`gregor replay`: a stopped group's committed offsets go back to a time, over the Kafka protocol."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from tests.extensions.conftest import gregor_cli

pytestmark = pytest.mark.clients
BASE_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def _produce_timed(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(20):  # partition p gets records i = p, p+2, ...; record i is stamped BASE_MS + i seconds
        producer.send(topic, value=b"r%d" % i, partition=i % 2, timestamp_ms=BASE_MS + i * 1000)
    producer.flush()
    producer.close()


def _consume_all(bootstrap: str, topic: str, group: str, expected: int) -> list:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.commit()
    consumer.close()
    return got


def test_replay_moves_a_group_back_to_a_timestamp_and_it_rereads_from_there(admin_broker, topic_name):
    group = f"replay-{topic_name}"
    _produce_timed(admin_broker.bootstrap, topic_name)
    assert len(_consume_all(admin_broker.bootstrap, topic_name, group, 20)) == 20
    done = gregor_cli("replay", "--bootstrap", admin_broker.bootstrap, "--group", group, "--topic", topic_name,
                      "--to-time", "2023-11-14T22:13:32Z")  # the time of record 12
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{topic_name}-0: 10 -> 6", f"{topic_name}-1: 10 -> 6"]
    again = _consume_all(admin_broker.bootstrap, topic_name, group, 8)
    assert sorted(int(r.value[1:]) for r in again) == list(range(12, 20))


def test_replay_accepts_epoch_milliseconds_and_goes_to_the_end_past_the_last_record(admin_broker, topic_name):
    group = f"replay-{topic_name}"
    _produce_timed(admin_broker.bootstrap, topic_name)
    _consume_all(admin_broker.bootstrap, topic_name, group, 20)
    done = gregor_cli("replay", "--bootstrap", admin_broker.bootstrap, "--group", group, "--topic", topic_name,
                      "--to-time", str(BASE_MS + 3_000))
    assert done.stdout.splitlines() == [f"{topic_name}-0: 10 -> 2", f"{topic_name}-1: 10 -> 1"]
    done = gregor_cli("replay", "--bootstrap", admin_broker.bootstrap, "--group", group, "--topic", topic_name,
                      "--to-time", str(BASE_MS + 99_000))
    assert done.stdout.splitlines() == [f"{topic_name}-0: 2 -> 10", f"{topic_name}-1: 1 -> 10"]


def test_replay_refuses_a_group_with_active_members(admin_broker, topic_name):
    group = f"busy-{topic_name}"
    _produce_timed(admin_broker.bootstrap, topic_name)
    consumer = KafkaConsumer(topic_name, bootstrap_servers=admin_broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest")
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    try:
        done = gregor_cli("replay", "--bootstrap", admin_broker.bootstrap, "--group", group, "--topic",
                          topic_name, "--to-time", "0")
    finally:
        consumer.close()
    assert done.returncode == 1
    assert "1 active member(s)" in done.stderr and done.stdout == ""
