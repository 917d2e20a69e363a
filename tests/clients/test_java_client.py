"""The Java client (org.apache.kafka:kafka-clients, the one Spark ships) against a live Gregor.

Each test drives tests/clients/java/GregorJavaClient.java in a fresh JVM; see `run_java`.
"""

from __future__ import annotations

import time

import pytest

from tests.clients.java_client import JavaClientError, records_only, require_java, run_java

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


def test_admin_create_existing_topic_fails_with_topic_exists(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    with pytest.raises(Exception, match="TopicExistsException"):
        create_topic(bootstrap, topic_name)


def test_admin_delete_topic_removes_it(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    java(bootstrap, "admin", "delete-topic", "--topic", topic_name)
    assert topic_name not in {t["topic"] for t in java(bootstrap, "admin", "list-topics")}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_acks_all_produce_100_then_assign_consume_from_earliest(bootstrap, topic_name, codec):
    create_topic(bootstrap, topic_name)
    acks = java(
        bootstrap, "produce", "--topic", topic_name, "--count", "100", "--acks", "all",
        "--idempotence", "true", "--compression", codec, "--key-prefix", "k-",
        "--headers", "idx={i},src=java",
    )  # fmt: skip
    assert sorted((a["index"], a["partition"], a["offset"]) for a in acks) == [(i, 0, i) for i in range(100)]

    got = java(bootstrap, "consume-assign", "--topic", topic_name, "--from", "earliest", "--max", "100")
    assert [r["offset"] for r in got] == list(range(100))
    assert [r["key"] for r in got] == [f"k-{i}" for i in range(100)]
    assert [r["value"] for r in got] == [f"value-{i}" for i in range(100)]
    assert [r["headers"] for r in got] == [[["idx", str(i)], ["src", "java"]] for i in range(100)]
    assert all(r["partition"] == 0 and r["timestamp_type"] == "CreateTime" for r in got)


def test_produce_to_three_partitions_keeps_each_key_on_one_partition(bootstrap, topic_name):
    create_topic(bootstrap, topic_name, partitions=3)
    acks = java(bootstrap, "produce", "--topic", topic_name, "--count", "60", "--key-prefix", "key")
    assert len(acks) == 60
    got = java(bootstrap, "consume-assign", "--topic", topic_name, "--max", "60", "--to-end")
    assert sorted(r["value"] for r in got) == sorted(f"value-{i}" for i in range(60))
    for partition in range(3):
        offsets = [r["offset"] for r in got if r["partition"] == partition]
        assert offsets == list(range(len(offsets)))
    partition_of_key = {r["key"]: r["partition"] for r in got}
    assert partition_of_key == {f"key{a['index']}": a["partition"] for a in acks}


def test_large_values_round_trip(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    java(bootstrap, "produce", "--topic", topic_name, "--count", "5", "--value-size", "300000")
    got = java(bootstrap, "consume-assign", "--topic", topic_name, "--max", "5")
    assert [len(r["value"]) for r in got] == [300_000] * 5
    assert got[4]["value"].startswith("value-4...")


def test_list_offsets_earliest_latest_and_for_timestamp(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    java(
        bootstrap, "produce", "--topic", topic_name, "--count", "100", "--timestamp", str(BASE_TS),
        "--timestamp-step", "10",
    )  # fmt: skip

    def offsets(spec: str) -> tuple[int, int]:
        [answer] = java(
            bootstrap, "admin", "list-offsets", "--topic", topic_name, "--partitions", "0", "--spec", spec
        )
        return answer["offset"], answer["timestamp"]

    assert offsets("earliest")[0] == 0
    assert offsets("latest")[0] == 100
    assert offsets(f"time:{BASE_TS}") == (0, BASE_TS)
    assert offsets(f"time:{BASE_TS + 505}") == (51, BASE_TS + 510)
    assert offsets(f"time:{BASE_TS + 990}") == (99, BASE_TS + 990)
    assert offsets(f"time:{BASE_TS + 991}") == (-1, -1)
    assert offsets("max-timestamp") == (99, BASE_TS + 990)


def test_consume_assign_from_offset_and_from_timestamp(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    java(
        bootstrap, "produce", "--topic", topic_name, "--count", "20", "--timestamp", str(BASE_TS),
        "--timestamp-step", "10",
    )  # fmt: skip
    from_offset = java(bootstrap, "consume-assign", "--topic", topic_name, "--from", "15", "--to-end")
    assert [r["offset"] for r in from_offset] == [15, 16, 17, 18, 19]
    from_time = java(
        bootstrap, "consume-assign", "--topic", topic_name, "--from", f"time:{BASE_TS + 171}", "--to-end"
    )
    assert [(r["offset"], r["timestamp"]) for r in from_time] == [(18, BASE_TS + 180), (19, BASE_TS + 190)]


def test_describe_topic_configs(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    configs = {c["name"]: c for c in java(bootstrap, "admin", "describe-configs", "--topic", topic_name)}
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["message.timestamp.type"]["value"] == "CreateTime"


def test_consumer_group_commits_and_resumes_after_committed_offset(bootstrap, topic_name):
    create_topic(bootstrap, topic_name, partitions=2)
    java(bootstrap, "produce", "--topic", topic_name, "--count", "40", "--key-prefix", "k")
    group = f"group-{topic_name}"

    first = java(bootstrap, "consume-group", "--group", group, "--topic", topic_name, "--max", "40")
    assigned = [e for e in first if e.get("event") == "assigned"]
    assert sorted(p for _, p in assigned[0]["partitions"]) == [0, 1]
    assert sorted(r["value"] for r in records_only(first)) == sorted(f"value-{i}" for i in range(40))

    committed = java(bootstrap, "admin", "group-offsets", "--group", group)
    ends = {a["partition"]: a["offset"] for a in java(
        bootstrap, "admin", "list-offsets", "--topic", topic_name, "--partitions", "0,1", "--spec", "latest"
    )}  # fmt: skip
    assert {c["partition"]: c["offset"] for c in committed} == ends
    assert group in {g["group"] for g in java(bootstrap, "admin", "list-groups")}

    java(bootstrap, "produce", "--topic", topic_name, "--count", "5", "--value-prefix", "late-")
    second = java(bootstrap, "consume-group", "--group", group, "--topic", topic_name, "--max", "5")
    assert sorted(r["value"] for r in records_only(second)) == [f"late-{i}" for i in range(5)]


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


def test_record_above_broker_max_message_bytes_fails_with_record_too_large(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    with pytest.raises(JavaClientError, match="RecordTooLargeException"):
        java(
            bootstrap, "produce", "--topic", topic_name, "--count", "1", "--value-size", "2000000",
            "--prop", "max.request.size=5000000",  # let the broker, not the client, refuse it
        )  # fmt: skip


def test_fetch_beyond_log_end_without_reset_policy_fails_with_offset_out_of_range(bootstrap, topic_name):
    create_topic(bootstrap, topic_name)
    java(bootstrap, "produce", "--topic", topic_name, "--count", "3")
    with pytest.raises(JavaClientError, match="OffsetOutOfRangeException"):
        java(bootstrap, "consume-assign", "--topic", topic_name, "--from", "50", timeout_ms=5_000)


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
