"""Kafka 4.4's own command-line tools against Gregor and against Kafka 4.4.0: kafka-topics
(TopicCommand: create, list, describe — through DescribeTopicPartitions in 4.x —, alter, delete),
kafka-consumer-groups (ConsumerGroupCommand on a consumer-protocol group: list with types,
describe, reset offsets), kafka-share-groups (ShareGroupCommand: list, describe, reset the
start offset) and kafka-configs on brokers (ConfigCommand: a broker's own and the cluster-wide
dynamic settings added, described with their synonyms, deleted), run from the jars of tests/oracle/pom.xml (org.apache.kafka:kafka-tools) with the
same arguments and the same checks on both brokers."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer

from tests.kit.both import GREGOR, KAFKA, started
from tests.kit.broker_configs import settled
from tests.kit.kafka import kafka_libs

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]
TOPICS = "org.apache.kafka.tools.TopicCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    with started(request.param, tmp_path, {}, in_process=True, kafka_version=KAFKA_4) as b:
        yield b


def _tool(main: str, bootstrap: str, *args: str) -> list[str]:
    """The tool's stdout lines; the test fails with its stderr if it exits non-zero."""
    libs = kafka_libs(KAFKA_4)
    if not any(libs.glob("kafka-tools-4*.jar")):
        pytest.fail(f"kafka-tools is not in {libs}: run bin/setup-kafka (tests/oracle/pom.xml lists it)")
    done = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{libs}/*", main,
                           "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{main} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return [line for line in done.stdout.splitlines() if line.strip()]


def _table(lines: list[str]) -> list[dict[str, str]]:
    """The tools' column tables (a header line, then rows) as dicts; blank and GROUP-less lines dropped."""
    header = lines[0].split()
    return [dict(zip(header, line.split())) for line in lines[1:] if line.split() != header]


def test_kafka_topics_creates_lists_describes_alters_and_deletes(broker):
    b = broker.bootstrap
    assert _tool(TOPICS, b, "--create", "--topic", "tooled", "--partitions", "3",
                 "--replication-factor", "1") == ["Created topic tooled."]
    assert "tooled" in _tool(TOPICS, b, "--list")
    described = _tool(TOPICS, b, "--describe", "--topic", "tooled")
    assert described[0].startswith("Topic: tooled\tTopicId: ") and "\tPartitionCount: 3\t" in described[0]
    partitions = [{k: v.strip() for k, v in (field.split(":", 1) for field in line.strip().split("\t"))}
                  for line in described[1:]]
    assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    assert all(p["Leader"] == p["Replicas"] == p["Isr"] for p in partitions)
    _tool(TOPICS, b, "--alter", "--topic", "tooled", "--partitions", "5")
    assert "\tPartitionCount: 5\t" in _tool(TOPICS, b, "--describe", "--topic", "tooled")[0]
    _tool(TOPICS, b, "--delete", "--topic", "tooled")
    deadline = time.monotonic() + 30
    while "tooled" in _tool(TOPICS, b, "--list") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "tooled" not in _tool(TOPICS, b, "--list")


def _produce(bootstrap: str, topic: str, count: int) -> None:
    _tool(TOPICS, bootstrap, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, str(i).encode())
    producer.flush(30)


def test_kafka_consumer_groups_lists_describes_and_resets_a_consumer_protocol_group(broker):
    b = broker.bootstrap
    _produce(b, "grouped", 10)
    consumer = Consumer({"bootstrap.servers": b, "group.id": "tool-group", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["grouped"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
            consumer.commit(message=message, asynchronous=False)
    consumer.close()
    assert read == 10
    listed = _table(_tool(GROUPS, b, "--list", "--type"))
    assert {"GROUP": "tool-group", "TYPE": "Consumer"} in listed, listed
    [row] = _table(_tool(GROUPS, b, "--describe", "--group", "tool-group"))
    assert (row["TOPIC"], row["PARTITION"], row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (
        "grouped", "0", "10", "10", "0"), row
    [moved] = _table(_tool(GROUPS, b, "--reset-offsets", "--group", "tool-group", "--topic", "grouped",
                           "--to-earliest", "--execute"))
    assert (moved["TOPIC"], moved["PARTITION"], moved["NEW-OFFSET"]) == ("grouped", "0", "0"), moved
    [row] = _table(_tool(GROUPS, b, "--describe", "--group", "tool-group"))
    assert (row["CURRENT-OFFSET"], row["LAG"]) == ("0", "10"), row


def test_kafka_share_groups_lists_describes_and_resets_a_share_group(broker):
    b = broker.bootstrap
    _produce(b, "queued", 10)
    _tool(GROUPS, b, "--list")  # the tools' classes warm up; nothing to check
    subprocess.run(["java", "-cp", f"{kafka_libs(KAFKA_4)}/*", "org.apache.kafka.tools.ConfigCommand",
                    "--bootstrap-server", b, "--alter", "--entity-type", "groups", "--entity-name", "tool-share",
                    "--add-config", "share.auto.offset.reset=earliest"], check=True, capture_output=True, timeout=120)
    member = ShareConsumer({"bootstrap.servers": b, "group.id": "tool-share"})
    member.subscribe(["queued"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 10 and time.monotonic() < deadline:
        read += len([m for m in member.poll(0.5) or [] if m.error() is None])
    member.poll(0.5)  # acknowledges the last records (implicit mode)
    assert read == 10
    try:
        assert "tool-share" in _tool(SHARE_GROUPS, b, "--list")
        described = _table(_tool(SHARE_GROUPS, b, "--describe", "--group", "tool-share", "--members"))
        assert [(r["GROUP"], r["ASSIGNMENT"]) for r in described] == [("tool-share", "queued:0")], described
    finally:
        member.close()
    deadline = time.monotonic() + 30
    while True:  # the group is empty once its member has left; then its start offset can be reset
        done = subprocess.run(["java", "-cp", f"{kafka_libs(KAFKA_4)}/*", SHARE_GROUPS, "--bootstrap-server", b,
                               "--reset-offsets", "--group", "tool-share", "--topic", "queued", "--to-earliest",
                               "--execute"], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode == 0 and "Error" not in done.stdout or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert done.returncode == 0, done.stderr
    [moved] = _table([line for line in done.stdout.splitlines() if line.strip()])
    assert (moved["GROUP"], moved["TOPIC"], moved["PARTITION"], moved["NEW-OFFSET"]) == (
        "tool-share", "queued", "0", "0"), moved


def test_kafka_configs_alters_describes_and_deletes_dynamic_broker_settings(broker):
    b = broker.bootstrap
    node = _tool(CONFIGS, b, "--describe", "--entity-type", "brokers")[0].split()[-2]  # "... for broker N are:"
    brokers, default = ("--entity-type", "brokers", "--entity-name", node), ("--entity-type", "brokers",
                                                                             "--entity-default")
    _tool(CONFIGS, b, "--alter", *brokers, "--add-config", "log.cleaner.threads=2,message.max.bytes=2000000")
    _tool(CONFIGS, b, "--alter", *default, "--add-config", "log.retention.ms=2000000")
    settled(lambda: len(_tool(CONFIGS, b, "--describe", *brokers)), 3)  # Kafka: a moment after answering
    own = _tool(CONFIGS, b, "--describe", *brokers)
    assert own == [
        f"Dynamic configs for broker {node} are:",
        ("  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
        "DEFAULT_CONFIG:log.cleaner.threads=1}"),
        ("  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000, "
        "DEFAULT_CONFIG:message.max.bytes=1048588}")], own
    # Kafka 4.4 also lists min.insync.replicas, which its storage format sets cluster-wide (docs/compatibility.md)
    assert [line for line in _tool(CONFIGS, b, "--describe", *default) if "min.insync.replicas" not in line] == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=2000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=2000000}"]
    _tool(CONFIGS, b, "--alter", *brokers, "--delete-config", "log.cleaner.threads,message.max.bytes")
    _tool(CONFIGS, b, "--alter", *default, "--delete-config", "log.retention.ms")
    settled(lambda: len(_tool(CONFIGS, b, "--describe", *brokers)), 1)
    assert _tool(CONFIGS, b, "--describe", *brokers) == [f"Dynamic configs for broker {node} are:"]
