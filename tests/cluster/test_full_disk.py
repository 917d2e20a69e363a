"""Full disks in a broker group, on real small file systems (a tmpfs mounted by the test: root
only, skipped otherwise).

A follower whose disk fills stays up, logs once why it cannot apply what the master ships, keeps
its stream and tries again every second; it leaves the sync-state set after
`replica.lag.time.max.ms`, and acks=all goes on with the rest of the set. Once space is freed it
catches up without a restart and rejoins, holding every acknowledged record at its offset.

A master whose disk fills answers KAFKA_STORAGE_ERROR and keeps leading; once space is freed
producing resumes at the next offset."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from compat_tests.clients import make_client
from tests.kit.wire import fetch
from tests.kit.wire import produce_batch as produce
from tests.kit.wire import WireClient
from tests.kit.group import BrokerGroup, wait_described
from tests.cluster.load import create_topic
from tests.durability.records import _batch, _read_values
from tests.durability.full_disk import _ballast, mount_tmpfs

pytestmark = [pytest.mark.crash]
MIB = 1 << 20
FULL = 3  # the follower whose disk fills
VALUE = 32 * 1024
KAFKA_STORAGE_ERROR = 56
SETTINGS = {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2", "log.retention.ms": "-1",
            "commitlog.segment.bytes": str(2 * MIB), "message.max.bytes": str(64 * 1024),
            "consumequeue.entries.per.file": "1000"}


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    """The tmpfs mounted by a test (`_mount_small_fs`), unmounted after it."""
    mounted: list[Path] = []
    yield mounted
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _mount_small_fs(path: Path, mounted: list[Path], size: str) -> None:
    mount_tmpfs(path, size)
    mounted.append(path)


def _sync_state_set(group: BrokerGroup) -> list[int]:
    record, _ = group.state()
    return sorted(record["sync_state_set"]) if record else []


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_follower_on_a_full_disk_leaves_the_set_and_rejoins_once_space_is_freed(broker_group, mounts):
    group = broker_group(3, start=False, **SETTINGS)
    fs = group.nodes[FULL].data_dir
    _mount_small_fs(fs, mounts, "32m")
    group.start()
    topic = "follower-disk-full"
    create_topic(group, topic, partitions=1)
    wait_described(group.bootstrap, topic, 1, whole_isr=True)
    ballast = _ballast(fs, leave=3 * MIB)
    producer = KafkaProducer(bootstrap_servers=group.bootstrap, acks="all", linger_ms=0,
                             request_timeout_ms=30000, max_block_ms=30000)
    acked: list[tuple[bytes, int]] = []
    try:
        for i in range(400):  # 12.5 MiB: far beyond the follower's room
            value = b"%06d" % i + b"x" * VALUE
            acked.append((value, producer.send(topic, value, partition=0).get(timeout=60).offset))
        log = group.nodes[FULL].log()
        assert group.nodes[FULL].proc.poll() is None, log[-3000:]
        assert _sync_state_set(group) == sorted(set(group.nodes) - {FULL})
        # one line says why, and the stream stays: no reconnection, and no line, per retry
        errors = [line for line in log.splitlines() if "cannot apply what master 1 ships" in line]
        assert len(errors) == 1 and "No space left on device" in errors[0], log[-3000:]
        master_log = group.nodes[1].log()
        assert master_log.count(f"node {FULL} follows from commitlog position") == 1, master_log[-3000:]
        ballast.unlink()  # the operator frees space: no restart
        _wait(lambda: _sync_state_set(group) == sorted(group.nodes), 60, "the follower never rejoined the set")
        assert "applying what master 1 ships again" in group.nodes[FULL].log()
        for i in range(400, 420):
            value = b"%06d" % i
            acked.append((value, producer.send(topic, value, partition=0).get(timeout=60).offset))
    finally:
        producer.close()
    # the follower holds it all: the others stop, it becomes the master, and alone in the set
    # (its high watermark then is its log's end)
    for node in group.nodes:
        if node != FULL:
            group.kill(node)
    _wait(lambda: group.state()[0]["master"] == FULL and _sync_state_set(group) == [FULL], 30,
          "the follower did not take over")
    wait_described(group.address(FULL), topic, 1)
    reader = make_client("kafka-python", group.address(FULL))
    stored = [(r.value, r.offset) for r in reader.consume(topic, [0], "earliest", timeout=60)]
    assert stored == acked


def test_a_master_on_a_full_disk_refuses_produce_and_resumes_once_space_is_freed(broker_group, mounts):
    """The master answers KAFKA_STORAGE_ERROR, appends nothing and keeps leading (as a RocketMQ
    broker on a full disk refuses writes; Kafka marks the log directory offline and moves its
    leaders, docs/replication.md); its followers lose nothing, and once space is freed producing
    resumes at the next offset with the whole set acknowledging."""
    group = broker_group(3, start=False, **SETTINGS)
    fs = group.nodes[1].data_dir
    _mount_small_fs(fs, mounts, "32m")
    group.start()
    assert group.master() == 1  # started first, and alone then
    topic = "master-disk-full"
    create_topic(group, topic, partitions=1)
    wait_described(group.bootstrap, topic, 1, whole_isr=True)
    ballast = _ballast(fs, leave=3 * MIB)
    client = WireClient(group.address(1))
    acked: list[bytes] = []
    for i in range(400):
        value = b"%06d" % i + b"x" * VALUE
        began = time.monotonic()
        answer = produce(client, topic, _batch([value]), acks=-1)
        assert time.monotonic() - began < 5.0
        if answer.error_code == KAFKA_STORAGE_ERROR:
            break
        assert answer.error_code == 0 and answer.base_offset == len(acked), answer
        acked.append(value)
    else:
        pytest.fail("the master's file system never filled")
    assert acked
    assert produce(client, topic, _batch([b"r" * VALUE]), acks=-1).error_code == KAFKA_STORAGE_ERROR
    assert group.master() == 1 and _sync_state_set(group) == sorted(group.nodes)
    ballast.unlink()  # the operator frees space: no restart
    answer = produce(client, topic, _batch([b"after"]), acks=-1)
    assert answer.error_code == 0 and answer.base_offset == len(acked)
    assert _read_values(client, topic, 0, 0, len(acked) + 1) == acked + [b"after"]
    client.close()
    _wait(lambda: _sync_state_set(group) == sorted(group.nodes), 30, "a follower left the set")
    group.kill(1)  # a follower holds it all too
    successor = group.master(other_than=1)
    wait_described(group.address(successor), topic, 1)
    client = WireClient(group.address(successor))
    _wait(lambda: fetch(client, topic, len(acked)).high_watermark == len(acked) + 1, 30, "the hw never moved")
    assert _read_values(client, topic, 0, 0, len(acked) + 1) == acked + [b"after"]
    client.close()
