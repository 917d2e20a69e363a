"""Dynamic broker settings in a cluster: a cluster-wide default set at a follower of one broker group
reaches every node of every group through ZooKeeper (as ACLs and group configs do) and is in force
there, while a setting of one node stays that node's (broker/broker_settings.py)."""

from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest

from tests.cluster.admin_calls import _until
from tests.kit.broker_configs import BROKER, SET, describe, incremental
from tests.kit.wire import WireClient


def _described(address: str, name: str, keys: list[str]) -> dict:
    client = WireClient(address)
    try:
        return describe(client, BROKER, name, keys)
    finally:
        client.close()


def _topic_value(address: str, topic: str, name: str) -> tuple:
    client = WireClient(address)
    try:
        return describe(client, 2, topic, [name])[name][:3]
    finally:
        client.close()


def test_a_default_set_at_a_follower_is_in_force_at_every_node_and_a_nodes_own_stays_its_own(broker_group):
    a = broker_group(2, name="a")
    topic = "defaults-from-the-broker"
    b = broker_group(2, name="b", first_id=3)
    follower = next(n for n in a.nodes if n != a.master())
    client = WireClient(a.address(follower))
    try:
        assert incremental(client, "", [("message.max.bytes", SET, "500000")]) == (0, None)
        assert incremental(client, str(follower), [("num.io.threads", SET, "9")]) == (0, None)
    finally:
        client.close()
    client = WireClient(a.address(a.master()))
    try:
        T = CreateTopicsRequest.CreatableTopic
        created = client.request(CreateTopicsRequest[5](topics=[T(  # at the master: a follower answers NOT_CONTROLLER
            name=topic, num_partitions=1, replication_factor=-1, assignments=[], configs=[])],
            timeout_ms=15000, validate_only=False))
        assert created.topics[0].error_code == 0
    finally:
        client.close()
    for group in (a, b):
        for node in group.nodes:
            address = group.address(node)
            _until(lambda address=address: _described(address, "", ["message.max.bytes"]),
                   {"message.max.bytes": ("500000", False, 3, [("message.max.bytes", "500000", 3)])}, seconds=30)
            expected_threads = "9" if node == follower else "8"
            assert _described(address, str(node), ["num.io.threads"])["num.io.threads"][0] == expected_threads
    for node in a.nodes:  # the topic's default follows at every node of its group
        _until(lambda node=node: _topic_value(a.address(node), topic, "max.message.bytes"),
               ("500000", False, 3), seconds=30)
