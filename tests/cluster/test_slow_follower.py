"""A follower that stops keeping up while it stays alive in ZooKeeper (SIGSTOP, with a session
timeout longer than `replica.lag.time.max.ms`): the master removes it from the sync-state set
after the lag time, not after its session ends, and acks=all goes on with the others; resumed
(SIGCONT), it catches up and rejoins, and no record is lost or doubled."""

from __future__ import annotations

import os
import signal
import time

from kafka import KafkaProducer

from tests.cluster.load import create_topic, read_all

LAG_MS = 2000
SESSION_MS = 15000


def test_a_stalled_follower_leaves_the_set_after_the_lag_time_and_rejoins(broker_group):
    group = broker_group(3, **{"replica.lag.time.max.ms": str(LAG_MS), "zookeeper.session.timeout.ms": str(SESSION_MS)})
    topic = "slow-follower"
    create_topic(group, topic, partitions=1, **{"min.insync.replicas": "2"})
    producer = KafkaProducer(bootstrap_servers=group.bootstrap, acks="all", linger_ms=0, request_timeout_ms=30000)
    values = [b"before-%d" % i for i in range(10)]
    for value in values:
        producer.send(topic, value, partition=0).get(timeout=30)
    master = group.master()
    stalled = next(n for n in group.nodes if n != master)
    pid = group.nodes[stalled].proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        producer.send(topic, b"while-stalled", partition=0).get(timeout=30)
        took = time.monotonic() - began
        values.append(b"while-stalled")
        record, live = group.state()
        # acknowledged once the lag time removed it, while ZooKeeper still lists it as alive
        assert stalled not in record["sync_state_set"] and stalled in live, (record, live)
        assert LAG_MS / 1000 * 0.5 < took < SESSION_MS / 1000 * 0.6, took
        for i in range(10):
            producer.send(topic, b"stalled-%d" % i, partition=0).get(timeout=30)
            values.append(b"stalled-%d" % i)
    finally:
        os.kill(pid, signal.SIGCONT)
    group.wait_sync_state_set(3)
    for i in range(10):
        producer.send(topic, b"after-%d" % i, partition=0).get(timeout=30)
        values.append(b"after-%d" % i)
    producer.close()
    assert [r.value for r in read_all(group, topic, partitions=1)[0]] == values
