"""Every `gregor` client command against a live Gregor and a real Apache Kafka 3.9.0, run as
subprocesses: exit status, tables, JSON and the one-line errors. The same assertions hold on both
brokers, which shows the commands speak only the Kafka protocol."""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import pytest
from kafka import KafkaConsumer, KafkaProducer

from tests.cli.conftest import KAFKA, ROOT, assert_fails

pytestmark = pytest.mark.clients
BASE_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
# Records stamped in 2023 are past the default 7-day retention: Kafka deletes them (rolling the
# active segment) at its next retention check, every 5 minutes, so topics written by
# _produce_timed keep their records forever
KEEP = ("--config", "retention.ms=-1")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _produce_timed(bootstrap: str, topic: str, count: int, partitions: int = 2) -> None:
    """Record i goes to partition i % partitions with timestamp BASE_MS + i s and value r<i>."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(count):
        producer.send(topic, value=b"r%d" % i, partition=i % partitions, timestamp_ms=BASE_MS + i * 1000)
    producer.flush()
    producer.close()


def _table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_topic_create_list_describe_add_partitions_delete(target, topic_name):
    done = target("topic", "create", topic_name, "--partitions", "3", "--config", "retention.ms=3600000")
    assert (done.returncode, done.stdout) == (0, f"created topic {topic_name}\n"), done.stderr

    listed = target("topic", "list", "--output", "json").json()
    assert {"name": topic_name, "partitions": 3, "replicas": 1, "internal": False} in listed
    assert [topic_name, "3", "1"] in _table(target("topic", "list").stdout)
    assert _table(target("topic", "list").stdout)[0] == ["NAME", "PARTITIONS", "REPLICAS"]

    broker_id = target("cluster", "info", "-o", "json").json()["brokers"][0]["id"]
    described = target("topic", "describe", topic_name, "-o", "json").json()
    assert described["partitions"] == [{"partition": p, "leader": broker_id, "replicas": [broker_id],
                                        "isr": [broker_id], "log_start_offset": 0, "log_end_offset": 0}
                                       for p in range(3)]
    configs = {c["name"]: c for c in described["configs"]}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("3600000",
                                                                                     "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"

    text = target("topic", "describe", topic_name).stdout
    assert text.startswith(f"NAME        {topic_name}\nPARTITIONS  3\nREPLICAS    1\n\n")
    rows = _table(text)
    assert ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "LOG-END-OFFSET"] in rows
    assert ["2", str(broker_id), str(broker_id), str(broker_id), "0", "0"] in rows
    assert ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"] in rows

    done = target("topic", "add-partitions", topic_name, "--to", "4")
    assert (done.returncode, done.stdout) == (0, f"topic {topic_name} now has 4 partitions\n"), done.stderr
    assert len(target("topic", "describe", topic_name, "-o", "json").json()["partitions"]) == 4
    assert_fails(target("topic", "add-partitions", topic_name, "--to", "2"), 1, "INVALID_PARTITIONS")

    done = target("topic", "delete", topic_name)
    assert (done.returncode, done.stdout) == (0, f"deleted topic {topic_name}\n"), done.stderr
    assert topic_name not in [t["name"] for t in target("topic", "list", "-o", "json").json()]


def test_topic_describe_shows_log_start_and_end_offsets(target, topic_name):
    target("topic", "create", topic_name, "--partitions", "2", *KEEP)
    _produce_timed(target.bootstrap, topic_name, 5)
    described = target("topic", "describe", topic_name, "-o", "json").json()
    assert [(p["log_start_offset"], p["log_end_offset"]) for p in described["partitions"]] == [(0, 3), (0, 2)]


def test_topic_create_refuses_an_existing_topic(target, topic_name):
    target("topic", "create", topic_name)
    assert_fails(target("topic", "create", topic_name), 1, f"cannot create topic {topic_name}",
                 "TOPIC_ALREADY_EXISTS")


def test_topic_alter_sets_and_deletes_configs(target, topic_name):
    """IncrementalAlterConfigs: a named config is set or removed, the others keep their values."""
    target("topic", "create", topic_name, "--config", "retention.bytes=1048576", "--config", "retention.ms=3600000")
    done = target("topic", "alter", topic_name, "--config", "retention.ms=60000", "--delete-config", "retention.bytes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"altered topic {topic_name}: retention.ms=60000, retention.bytes deleted\n"
    configs = {c["name"]: c for c in target("topic", "describe", topic_name, "-o", "json").json()["configs"]}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("60000", "DYNAMIC_TOPIC_CONFIG")
    assert (configs["retention.bytes"]["value"], configs["retention.bytes"]["source"]) == ("-1", "DEFAULT_CONFIG")


def test_topic_alter_refuses_an_unknown_config(target, topic_name):
    target("topic", "create", topic_name)
    assert_fails(target("topic", "alter", topic_name, "--config", "no.such.config=1"), 1,
                 f"cannot alter topic {topic_name}", "INVALID_CONFIG", "no.such.config")


def test_produce_then_consume_keeps_keys_values_and_headers_as_bytes(target, topic_name):
    """Lines are bytes: a key or header that is not UTF-8 arrives unchanged and prints as base64."""
    target("topic", "create", topic_name, "--partitions", "2")
    lines = b"k1:plain\n\xff\xfe:binary key\nk3:\xc3\xa9t\xc3\xa9\nk4:\x00\x9f\n:empty key\nk6:\n"
    done = target("produce", topic_name, "--key-separator", ":", "--header", "source=cli", "--header", b"raw=\xff",
                  "--partition", "1", stdin=lines)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

    records = target("consume", topic_name, "--from-beginning", "--max-messages", "6", "-o", "json").json_lines()
    assert [(r["partition"], r["offset"]) for r in records] == [(1, i) for i in range(6)]
    assert [(r["key"], r["key_encoding"], r["value"], r["value_encoding"]) for r in records] == [
        ("k1", "utf-8", "plain", "utf-8"),
        ("//4=", "base64", "binary key", "utf-8"),
        ("k3", "utf-8", "été", "utf-8"),
        ("k4", "utf-8", "AJ8=", "base64"),
        ("", "utf-8", "empty key", "utf-8"),
        ("k6", "utf-8", "", "utf-8"),
    ]
    assert all(r["headers"] == [{"key": "source", "value": "cli", "encoding": "utf-8"},
                                {"key": "raw", "value": "/w==", "encoding": "base64"}] for r in records)
    assert all(r["topic"] == topic_name and abs(r["timestamp"] - time.time() * 1000) < 600_000 for r in records)

    text = target("consume", topic_name, "--from-beginning", "--max-messages", "6", "--key-separator", "=")
    assert text.stdout.splitlines() == ["k1=plain", "//4==binary key", "k3=été", "k4=AJ8=", "=empty key", "k6="]


def test_produce_without_a_key_separator_sends_whole_lines_with_acks_1_and_0(target, topic_name):
    target("topic", "create", topic_name, "--partitions", "1")
    assert target("produce", topic_name, "--acks", "1", stdin=b"one\ntwo:2\n").returncode == 0
    assert target("produce", topic_name, "--acks", "0", stdin=b"three").returncode == 0  # no final newline
    records = target("consume", topic_name, "--from-beginning", "--max-messages", "3", "-o", "json").json_lines()
    assert [(r["key"], r["value"]) for r in records] == [(None, "one"), (None, "two:2"), (None, "three")]
    assert records[0]["key_encoding"] == "null"


def test_consume_starts_at_an_offset_or_a_time_in_one_partition(target, topic_name):
    target("topic", "create", topic_name, "--partitions", "2", *KEEP)
    _produce_timed(target.bootstrap, topic_name, 20)  # partition 0: r0, r2, ..., r18 at offsets 0..9
    at_offset = target("consume", topic_name, "--partition", "0", "--offset", "7", "--max-messages", "2", "-o", "json")
    assert [(r["offset"], r["value"]) for r in at_offset.json_lines()] == [(7, "r14"), (8, "r16")]
    at_time = target("consume", topic_name, "--partition", "1", "--from-time", _iso(BASE_MS + 12_500),
                     "--max-messages", "2")
    assert at_time.stdout.splitlines() == ["r13", "r15"]


def test_consume_without_a_start_reads_only_new_records(target, topic_name):
    """As kafka-console-consumer: no group and no start option means the log end."""
    target("topic", "create", topic_name, "--partitions", "1")
    target("produce", topic_name, stdin=b"old\n")
    consume = subprocess.Popen([sys.executable, "-m", "broker", "consume", topic_name, "--max-messages", "1",
                                "--bootstrap", target.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while consume.poll() is None and time.monotonic() < deadline:
            target("produce", topic_name, stdin=b"new\n")
            time.sleep(0.5)
        out, err = consume.communicate(timeout=10)
    finally:
        consume.kill()
    assert (consume.returncode, out, err) == (0, b"new\n", b"")


def test_ctrl_c_ends_a_group_consume_cleanly_and_commits_what_it_printed(target, topic_name):
    group = f"ctrl-c-{topic_name}"
    target("topic", "create", topic_name, "--partitions", "1")
    target("produce", topic_name, stdin=b"a\nb\nc\n")
    consume = subprocess.Popen([sys.executable, "-m", "broker", "consume", topic_name, "--group", group,
                                "--from-beginning", "--bootstrap", target.bootstrap],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    watchdog = threading.Timer(60, consume.kill)  # a consume that never prints must not hang the test
    watchdog.start()
    try:
        seen = [consume.stdout.readline() for _ in range(3)]
        consume.send_signal(signal.SIGINT)
        out, err = consume.communicate(timeout=30)
    finally:
        watchdog.cancel()
        consume.kill()
    assert seen == [b"a\n", b"b\n", b"c\n"], (consume.returncode, err.decode(errors="replace")[-3000:])
    assert (consume.returncode, out, err) == (0, b"", b"")
    offsets = target("group", "describe", group, "-o", "json").json()["offsets"]
    assert [(o["current_offset"], o["log_end_offset"], o["lag"]) for o in offsets] == [(3, 3, 0)]


def test_group_list_describe_reset_and_delete(target, topic_name):
    group = f"g-{topic_name}"
    target("topic", "create", topic_name, "--partitions", "2", *KEEP)
    _produce_timed(target.bootstrap, topic_name, 10)
    done = target("consume", topic_name, "--group", group, "--from-beginning", "--max-messages", "10")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 10, done.stderr

    assert {"group": group, "state": "Empty", "protocol_type": "consumer"} in target("group", "list", "-o",
                                                                                     "json").json()
    assert [group, "Empty", "consumer"] in _table(target("group", "list").stdout)
    described = target("group", "describe", group, "-o", "json").json()
    assert (described["group"], described["state"], described["members"]) == (group, "Empty", [])
    assert described["offsets"] == [{"topic": topic_name, "partition": p, "current_offset": 5, "log_end_offset": 5,
                                     "lag": 0, "member_id": None} for p in (0, 1)]
    assert [topic_name, "0", "5", "5", "0", "-"] in _table(target("group", "describe", group).stdout)

    def reset(*how: str) -> list[tuple[int, int | None, int]]:
        done = target("group", "reset-offsets", group, "--topic", topic_name, *how, "-o", "json")
        assert done.returncode == 0, done.stderr
        return [(r["partition"], r["old_offset"], r["new_offset"]) for r in done.json()]

    def lags() -> list[int]:
        return [o["lag"] for o in target("group", "describe", group, "-o", "json").json()["offsets"]]

    assert reset("--to-earliest", "--dry-run") == [(0, 5, 0), (1, 5, 0)]
    assert lags() == [0, 0]  # a dry run commits nothing
    assert reset("--to-earliest") == [(0, 5, 0), (1, 5, 0)] and lags() == [5, 5]
    assert reset("--to-latest") == [(0, 0, 5), (1, 0, 5)]
    assert reset("--to-offset", "2") == [(0, 5, 2), (1, 5, 2)] and lags() == [3, 3]
    assert reset("--to-offset", "99") == [(0, 2, 5), (1, 2, 5)]  # held within the log, as Kafka's tool does
    assert reset("--to-datetime", _iso(BASE_MS + 6_000)) == [(0, 5, 3), (1, 5, 3)]  # r6 (p0), r7 (p1)
    assert reset("--to-datetime", str(BASE_MS + 99_000)) == [(0, 3, 5), (1, 3, 5)]  # none after it: the end
    assert reset("--by-duration", "P3650D") == [(0, 5, 0), (1, 5, 0)]  # ten years ago: before every record
    text = target("group", "reset-offsets", group, "--topic", f"{topic_name}:1", "--to-latest")
    assert _table(text.stdout) == [["TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"], [topic_name, "1", "0", "5"]]

    done = target("group", "delete", group)
    assert (done.returncode, done.stdout) == (0, f"deleted group {group}\n"), done.stderr
    assert_fails(target("group", "describe", group), 1, f"unknown group {group}")


def test_group_describe_shows_members_and_reset_refuses_an_active_group(target, topic_name):
    group = f"busy-{topic_name}"
    target("topic", "create", topic_name, "--partitions", "2")
    consumer = KafkaConsumer(topic_name, bootstrap_servers=target.bootstrap, group_id=group, client_id="busy-one",
                             auto_offset_reset="earliest")
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        described = target("group", "describe", group, "-o", "json").json()
        refused = target("group", "reset-offsets", group, "--topic", topic_name, "--to-earliest")
        deleted = target("group", "delete", group)
    finally:
        consumer.close()
    assert described["state"] == "Stable"
    (member,) = described["members"]
    assert member["client_id"] == "busy-one"
    assert member["assignment"] == [{"topic": topic_name, "partition": p} for p in (0, 1)]
    assert [(o["partition"], o["current_offset"], o["member_id"]) for o in described["offsets"]] == [
        (0, None, member["member_id"]), (1, None, member["member_id"])]
    assert_fails(refused, 1, f"group {group} has 1 active member(s) (state Stable)", "stop its consumers first")
    assert_fails(deleted, 1, f"group {group}", "NON_EMPTY_GROUP")


def test_query_by_time_range_prints_the_records_within_it(target, topic_name):
    target("topic", "create", topic_name, "--partitions", "2", *KEEP)
    _produce_timed(target.bootstrap, topic_name, 20)
    done = target("query", "--topic", topic_name, "--from", _iso(BASE_MS + 5_000), "--to", _iso(BASE_MS + 9_000))
    assert done.returncode == 0, done.stderr
    found = done.json_lines()
    assert [(r["partition"], r["offset"], r["value"]) for r in found] == [
        (0, 3, "r6"), (0, 4, "r8"), (1, 2, "r5"), (1, 3, "r7"), (1, 4, "r9")]
    assert found[0]["timestamp"] == BASE_MS + 6_000 and found[0]["key_encoding"] == "null"
    open_ended = target("query", "--topic", topic_name, "--partition", "1", "--from", str(BASE_MS + 16_000))
    assert [r["value"] for r in open_ended.json_lines()] == ["r17", "r19"]
    after = target("query", "--topic", topic_name, "--from", str(BASE_MS + 60_000))
    assert (after.returncode, after.stdout) == (0, "")


def test_cluster_info_names_the_broker_and_the_cluster(target):
    info = target("cluster", "info", "--output", "json").json()
    (broker,) = info["brokers"]
    assert (broker["host"], str(broker["port"])) == tuple(target.bootstrap.split(":"))
    assert info["controller_id"] == broker["id"] and info["cluster_id"]
    text = target("cluster", "info").stdout
    assert text.startswith(f"CLUSTER-ID  {info['cluster_id']}\n")
    assert [str(broker["id"]), broker["host"], str(broker["port"]), "-"] in _table(text)


def test_replay_still_works_and_says_it_is_deprecated(target, topic_name):
    group = f"replay-{topic_name}"
    target("topic", "create", topic_name, "--partitions", "2", *KEEP)
    _produce_timed(target.bootstrap, topic_name, 4)
    done = target("replay", "--group", group, "--topic", topic_name, "--to-time", str(BASE_MS + 2_000))
    assert done.returncode == 0
    assert done.stdout.splitlines() == [f"{topic_name}-0: none -> 1", f"{topic_name}-1: none -> 1"]
    assert "deprecated" in done.stderr and "gregor group reset-offsets" in done.stderr


@pytest.mark.parametrize("command", [
    ("topic", "describe", "{t}"), ("topic", "alter", "{t}", "--config", "retention.ms=1"),
    ("topic", "add-partitions", "{t}", "--to", "9"), ("topic", "delete", "{t}"), ("produce", "{t}"),
    ("consume", "{t}", "--max-messages", "1"), ("query", "--topic", "{t}", "--from", "0"),
    ("group", "reset-offsets", "g-{t}", "--topic", "{t}", "--to-earliest"),
])
def test_an_unknown_topic_is_named_on_one_line(target, topic_name, command):
    done = target(*(part.format(t=topic_name) for part in command), stdin=b"x\n")
    assert_fails(done, 1, "unknown topic", topic_name)


@pytest.mark.parametrize("command", [("group", "describe"), ("group", "delete")])
def test_an_unknown_group_is_named_on_one_line(target, topic_name, command):
    assert_fails(target(*command, f"nobody-{topic_name}"), 1, f"unknown group nobody-{topic_name}")


def test_a_partition_the_topic_lacks_is_refused(target, topic_name):
    target("topic", "create", topic_name, "--partitions", "2")
    assert_fails(target("produce", topic_name, "--partition", "2", stdin=b"x\n"), 1,
                 f"topic {topic_name} has no partition 2")
    assert_fails(target("consume", topic_name, "--partition", "5"), 1, f"topic {topic_name} has no partition 5")


def test_a_line_without_the_key_separator_stops_produce_after_the_lines_before_it(target, topic_name):
    target("topic", "create", topic_name, "--partitions", "1")
    done = target("produce", topic_name, "--key-separator", "\t", stdin=b"a\t1\nno separator\nc\t3\n")
    assert_fails(done, 1, "line 2 has no key separator")
    records = target("consume", topic_name, "--from-beginning", "--max-messages", "1", "-o", "json").json_lines()
    assert [(r["key"], r["value"]) for r in records] == [("a", "1")]
    assert target("topic", "describe", topic_name, "-o", "json").json()["partitions"][0]["log_end_offset"] == 1


def test_create_view_makes_a_gregor_view_and_kafka_refuses_its_configs(target, topic_name):
    """Views are Gregor's (docs/extensions.md); Apache Kafka answers CreateTopics with INVALID_CONFIG."""
    view = f"{topic_name}-paid"
    if target.name == KAFKA:
        target("topic", "create", topic_name)
        assert_fails(target("topic", "create-view", view, "--source", topic_name, "--tags", "paid"), 1,
                     f"cannot create view {view}", "INVALID_CONFIG")
        return
    target("topic", "create", topic_name, "--partitions", "2", "--config", "tag.header=tag")
    target("produce", topic_name, "--header", "tag=paid", "--partition", "0", stdin=b"p1\np2\n")
    target("produce", topic_name, "--header", "tag=shipped", "--partition", "0", stdin=b"s1\n")
    target("produce", topic_name, "--header", "tag=paid", "--partition", "0", stdin=b"p3\n")
    done = target("topic", "create-view", view, "--source", topic_name, "--tags", "paid")
    assert (done.returncode, done.stdout) == (0, f"created view {view} of {topic_name} for tags paid\n"), done.stderr
    records = target("consume", view, "--from-beginning", "--max-messages", "3", "-o", "json").json_lines()
    assert [(r["offset"], r["value"]) for r in records] == [(0, "p1"), (1, "p2"), (3, "p3")]
    assert_fails(target("produce", view, stdin=b"x\n"), 1, f"cannot produce to {view}", "read-only view")


def test_group_describe_of_a_non_consumer_group_is_one_line(target):
    """A Kafka Connect worker's group ("connect" protocol, its own member metadata): kafka-python
    cannot decode it as the consumer protocol; the command says so in one line, as Kafka's
    kafka-consumer-groups refuses such a group."""
    from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest

    from tests.kit.wire import WireClient

    group = f"connect-like-{time.monotonic_ns()}"
    # ConnectProtocol's worker state: version, the worker's REST URL, its config offset
    url = b"http://127.0.0.1:8083"
    metadata = struct.pack(">hh", 1, len(url)) + url + struct.pack(">q", -1)
    client = WireClient(target.bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:  # Kafka's coordinator may not be loaded yet
            joined = client.request(JoinGroupRequest[3](
                group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                protocol_type="connect",
                protocols=[JoinGroupRequest[3].JoinGroupRequestProtocol(name="sessioned", metadata=metadata)]))
            if joined.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert joined.error_code == 0
        synced = client.request(SyncGroupRequest[2](
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            assignments=[SyncGroupRequest[2].SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                          assignment=metadata)]))
        assert synced.error_code == 0
        done = target("group", "describe", group)
    finally:
        client.close()
    assert_fails(done, 1, f"cannot describe group {group}", "do not use the consumer protocol")
