"""The Java client (org.apache.kafka:kafka-clients, the one Spark ships) against a live Gregor:
what compat_tests/ does not cover (acks 0/1, Spark's read loop, LogAppendTime, added partitions).

Each test drives tests/clients/java/GregorJavaClient.java, in the JVM kept for the session; see `run_java`.
"""

from __future__ import annotations

import time

import pytest

from compat_tests.clients.java import records_only, require_java, run_java

pytestmark = pytest.mark.clients

BASE_TS = 1_700_000_000_000  # fixed CreateTime timestamps make the offset-for-time answers exact


@pytest.fixture(autouse=True)
def _java() -> None:
    require_java()


def java(bootstrap: str, *args: str, timeout_ms: int = 20_000) -> list[dict]:
    """One harness run, e.g. java(b, "admin", "list-topics"); a client error raises JavaClientError."""
    return run_java(
        [*args, "--bootstrap", bootstrap, "--timeout-ms", str(timeout_ms)], timeout=timeout_ms / 1000 + 40
    )


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> dict:
    [created] = java(bootstrap, "admin", "create-topic", "--topic", topic, "--partitions", str(partitions))
    return created


def test_admin_create_topic_then_describe_and_list_it(bootstrap, topic_name):
    created = create_topic(bootstrap, topic_name, partitions=3)
    assert created == {"topic": topic_name, "created": True, "partitions": 3, "replication_factor": 1}

    [described] = java(bootstrap, "admin", "describe-topics", "--topic", topic_name)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    [cluster] = java(bootstrap, "admin", "describe-cluster")
    [node] = cluster["nodes"]
    assert f"{node['host']}:{node['port']}" == bootstrap
    for p in described["partitions"]:
        assert p["leader"] == node["id"] and p["replicas"] == [node["id"]] and p["isr"] == [node["id"]]
    assert topic_name in {t["topic"] for t in java(bootstrap, "admin", "list-topics")}


def test_acks_0_and_acks_1_produce_are_all_stored(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    fire_and_forget = java(
        bootstrap, "produce", "--topic", topic_name, "--count", "3", "--acks", "0", "--idempotence", "false"
    )
    assert [a["offset"] for a in fire_and_forget] == [-1, -1, -1]  # acks=0: the client never learns offsets
    leader_acked = java(bootstrap, "produce", "--topic", topic_name, "--count", "3", "--acks", "1")
    assert [a["offset"] for a in leader_acked] == [3, 4, 5]
    got = java(bootstrap, "consume-assign", "--topic", topic_name, "--to-end")
    assert [r["value"] for r in got] == [f"value-{i}" for i in (0, 1, 2, 0, 1, 2)]


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_spark_executor_read_loop_starts_mid_batch_and_sees_range_at_end(bootstrap, topic_name, codec):
    create_topic(bootstrap, topic_name)
    java(bootstrap, "produce", "--topic", topic_name, "--count", "50", "--compression", codec)
    lines = java(
        bootstrap, "spark-read", "--topic", topic_name, "--partition", "0", "--from", "37", "--until", "60",
        timeout_ms=4_000,
    )  # fmt: skip
    assert [r["offset"] for r in records_only(lines)] == list(range(37, 50))
    ranges = [line for line in lines if line.get("event") == "range"]
    assert ranges and all(r["earliest"] == 0 and r["latest"] == 50 for r in ranges)


def test_log_append_time_topic_stamps_records_with_broker_time(bootstrap, topic_name):
    java(
        bootstrap, "admin", "create-topic", "--topic", topic_name,
        "--config", "message.timestamp.type=LogAppendTime",
    )  # fmt: skip
    before = int(time.time() * 1000)
    acks = java(bootstrap, "produce", "--topic", topic_name, "--count", "3", "--timestamp", "1000")
    got = java(bootstrap, "consume-assign", "--topic", topic_name, "--to-end")
    assert [r["timestamp_type"] for r in got] == ["LogAppendTime"] * 3
    assert all(r["timestamp"] >= before - 5_000 for r in got)
    assert [a["timestamp"] for a in acks] == [r["timestamp"] for r in got]


def test_added_partitions_start_at_offset_zero(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    java(bootstrap, "produce", "--topic", topic_name, "--count", "5")
    java(bootstrap, "admin", "create-partitions", "--topic", topic_name, "--partitions", "3")
    [described] = java(bootstrap, "admin", "describe-topics", "--topic", topic_name)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    acks = java(bootstrap, "produce", "--topic", topic_name, "--count", "2", "--partition", "2")
    assert [(a["partition"], a["offset"]) for a in acks] == [(2, 0), (2, 1)]
