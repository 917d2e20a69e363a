"""A master's disk that starts failing under acks=all load (commitlog fsyncs fail with EIO,
through the LD_PRELOAD shim of tests/durability/failing_fsync.c, flush.mode=sync): the failed
append is never acknowledged, the node logs why, closes its ZooKeeper session and exits (as Kafka
halts a broker whose last log directory failed), a follower becomes master at once, rather than
after the session timeout, and holds every acknowledged record; restarted with a working disk,
the old master truncates, catches up and rejoins the set."""

from __future__ import annotations

import time

from kafka import KafkaProducer
from kafka.errors import KafkaError

from compat_tests.clients import make_client
from tests.kit.group import wait_described
from tests.kit.zookeeper import SESSION_TIMEOUT_MS
from tests.cluster.load import create_topic
from tests.durability.fsync_shim import shim  # noqa: F401 - the fixture that builds the shim

FAILING = 1  # the master: started first


def test_a_master_whose_disk_fails_exits_and_a_follower_takes_over_at_once(broker_group, shim, tmp_path):  # noqa: F811
    flag = tmp_path / "fail-fsync"
    group = broker_group(3, start=False, **{"flush.mode": "sync"})
    group.nodes[FAILING].env = {"LD_PRELOAD": str(shim), "GREGOR_FAIL_FSYNC_FLAG": str(flag)}
    group.start()
    assert group.master() == FAILING
    topic = "failing-disk"
    create_topic(group, topic, partitions=1)
    wait_described(group.bootstrap, topic, 1, whole_isr=True)
    producer = KafkaProducer(bootstrap_servers=group.bootstrap, acks="all", retries=0, linger_ms=0,
                             max_in_flight_requests_per_connection=1, request_timeout_ms=10000)
    acked: list[tuple[bytes, int]] = []
    failed: list[bytes] = []

    def send(value: bytes) -> None:
        try:
            acked.append((value, producer.send(topic, value, partition=0).get(timeout=30).offset))
        except KafkaError:
            failed.append(value)
            time.sleep(0.1)  # the polling loop's pause between probes: the next send asks again

    for i in range(50):
        send(b"before-%03d" % i)
    assert len(acked) == 50
    flag.touch()  # the master's disk starts failing
    began = time.monotonic()
    exited_after = None
    i = 0
    while len(acked) < 100:  # on: the new master answers
        send(b"during-%03d" % i)
        i += 1
        if exited_after is None and group.nodes[FAILING].proc.poll() is not None:
            exited_after = time.monotonic() - began
        assert time.monotonic() - began < 60, f"no new master acknowledged: {failed[-3:]}"
    took_over = time.monotonic() - began
    producer.close()
    log = group.nodes[FAILING].log()
    assert group.nodes[FAILING].proc.wait(10) == 1, log[-3000:]
    assert "fsync failed" in log and f"node {FAILING} leaves the cluster and exits" in log, log[-3000:]
    successor = group.master(other_than=FAILING)
    # its session was closed: the election did not wait for ZooKeeper's session timeout
    assert exited_after is not None and took_over < SESSION_TIMEOUT_MS / 1000, (exited_after, took_over)

    reader = make_client("kafka-python", group.address(successor))
    stored = {r.value: r.offset for r in reader.consume(topic, [0], "earliest", timeout=60)}
    lost = [(v, at) for v, at in acked if stored.get(v) != at]
    assert not lost, f"{len(lost)} acknowledged records lost or moved: {lost[:5]}"

    flag.unlink()  # the disk is fixed: the old master comes back as a follower
    group.restart(FAILING)
    group.wait_sync_state_set(3)
    assert group.master() == successor
