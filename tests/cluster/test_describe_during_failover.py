"""`gregor topic describe` while a broker group fails over, when an operator needs it most: the
partitions show no leader (Kafka's "leader not available") and the nodes that are alive, without
failing on the dead master; once a follower has taken over, they show it and the offsets again."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cluster.load import create_topic
from tests.kit.gregor import ROOT
from tests.kit.wait import wait_until


def describe(bootstrap: str, topic: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "broker", "topic", "describe", topic, "--bootstrap", bootstrap,
                           "-o", "json"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return json.loads(done.stdout)


def test_topic_describe_shows_leaderless_partitions_and_the_live_nodes_during_a_failover(broker_group):
    group = broker_group(3)
    create_topic(group, "orders", partitions=2)
    old = group.master()
    others = [n for n in group.nodes if n != old]
    survivors = ",".join(group.address(n) for n in others)
    group.kill(old)
    during = describe(survivors, "orders")  # before the dead master's ZooKeeper session ends
    assert [p["leader"] for p in during["partitions"]] == [-1, -1]
    assert [p["log_end_offset"] for p in during["partitions"]] == [None, None]  # no leader to ask
    assert during["alive"] == sorted(others)
    assert {b["id"]: b["answers"] for b in during["brokers"]}.get(old) is False  # listed while its session lasts
    assert during["configs"]  # any node answers DescribeConfigs of a topic

    new = group.master(other_than=old)

    def named() -> dict | None:
        found = describe(survivors, "orders")
        return found if all(p["leader"] == new for p in found["partitions"]) else None

    after = wait_until(named, 60, "the new master named")
    assert sorted(after["alive"]) == sorted(others)
    assert all(p["log_end_offset"] is not None for p in after["partitions"])
