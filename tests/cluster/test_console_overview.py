"""The web console's overview and topic page on a broker group (broker/console/pages.py, the
Cluster topology's broker_groups): each node shows the group's nodes, master and epoch, sync-state
set and, on the master, each follower's lag in bytes; partitions show their leader and ISR."""

from __future__ import annotations

import json
import urllib.request

from kafka.admin import KafkaAdminClient, NewTopic

from tests.kit.wait import wait_until


def _get(node, path: str) -> dict:
    with urllib.request.urlopen(f"http://{node.admin}{path}", timeout=10) as answer:
        return json.loads(answer.read())


def test_every_node_shows_its_broker_group_and_the_master_its_followers_lag(calm_group):
    group = calm_group  # its nodes serve the admin API
    master = group.master()
    admin = KafkaAdminClient(bootstrap_servers=group.address(master))
    admin.create_topics([NewTopic("console-orders", 2, 3)])
    admin.close()
    for node_id, node in group.nodes.items():
        overview = _get(node, "/v1/overview")
        assert overview["node"]["clustered"] and overview["node"]["id"] == node_id
        assert sorted(b["id"] for b in overview["brokers"]) == [1, 2, 3]
        (shown,) = overview["broker_groups"]
        assert {k: shown[k] for k in ("name", "master", "nodes", "live", "sync_state", "leaderless")} == {
            "name": "a", "master": master, "nodes": [1, 2, 3], "live": [1, 2, 3], "sync_state": [1, 2, 3],
            "leaderless": False}
        assert shown["epoch"] >= 1
        followers = sorted(f["id"] for f in shown["followers"])
        assert followers == (sorted(set(group.nodes) - {master}) if node_id == master else [])
        assert all(f["lag_bytes"] >= 0 for f in shown["followers"])
    wait_until(lambda: "console-orders" in {t["name"] for t in _get(group.nodes[master], "/v1/overview")["topics"]},
               10, "the topic in the master's overview")
    topic = _get(group.nodes[master], "/v1/topics/console-orders")
    assert [(p["leader"], sorted(p["replicas"]), sorted(p["isr"])) for p in topic["partitions"]] == [
        (master, [1, 2, 3], [1, 2, 3])] * 2
