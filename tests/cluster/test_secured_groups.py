"""Broker groups whose first listener requires SASL, and a client on another listener.

Metadata and FindCoordinator name every node at the address of the listener the request came in
on, as Kafka answers: before, other nodes were named at their first listener, so a client of the
PLAINTEXT listener was sent to SASL ports (and a SASL client, where PLAINTEXT came first, to
PLAINTEXT ports, where it is nobody).

A transaction over the partitions of two broker groups commits in such a cluster: the
coordinator's markers for the other group go over Gregor's replication port (the channel between
its nodes), not over a client listener, whose authentication and ACLs are for clients. Before, the coordinator sent them over a client
listener, as User:ANONYMOUS: the first one, which closed a connection without SASL, or the
client's, where ACLs refused it ClusterAction. The markers were never written, and read_committed
consumers of the other group's partitions never saw the transaction's records."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from tests.kit.wire import WireClient
from tests.kit.group import wait_described
from tests.cluster.transactions import transactions_read_committed
from tests.security.acl_wire import DENY, cluster_acl, create_acls
from tests.security.brokers import STANDARD_AUTHORIZER

pytestmark = pytest.mark.clients
CLUSTER_ACTION = 9

SETTINGS = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",  # SASL first
            "sasl.enabled.mechanisms": "SCRAM-SHA-256", "authorizer.class.name": STANDARD_AUTHORIZER,
            "allow.everyone.if.no.acl.found": "true"}  # PLAINTEXT clients are User:ANONYMOUS, open to all


def test_every_node_is_named_at_the_listener_the_client_came_in_on(broker_group):
    group = broker_group(3, **SETTINGS)
    plain = {n: node.listeners["PLAINTEXT"] for n, node in group.nodes.items()}
    sasl = {n: node.listeners["SASL_PLAINTEXT"] for n, node in group.nodes.items()}
    assert not set(plain.values()) & set(sasl.values())
    for address in plain.values():
        client = WireClient(address)
        try:
            brokers = client.request(MetadataRequest[1](topics=[])).brokers
            assert {b.node_id: f"{b.host}:{b.port}" for b in brokers} == plain
            found = client.request(FindCoordinatorRequest[1](key="some-group", key_type=0))
            assert (found.error_code, f"{found.host}:{found.port}") == (0, plain[group.master()])
        finally:
            client.close()


def test_a_transaction_over_two_groups_commits_behind_a_sasl_listener(broker_group):
    a = broker_group(2, "a", first_id=1, **SETTINGS)
    b = broker_group(2, "b", first_id=3, **SETTINGS)
    boot = ",".join(node.listeners["PLAINTEXT"] for g in (a, b) for node in g.nodes.values())
    admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic("txn-secured", 4, -1)])
    finally:
        admin.close()
    parts = wait_described(boot, "txn-secured", 4)
    assert {p["leader_id"] for p in parts} == {a.master(), b.master()}
    client = WireClient(boot.split(",")[0])  # the clients may do anything but what brokers do to each other
    try:
        assert [e for e, _ in create_acls(client, cluster_acl("User:ANONYMOUS", CLUSTER_ACTION, permission=DENY))] == [0]
    finally:
        client.close()
    assert sorted(transactions_read_committed(boot, "txn-secured", (True, False, True))) == \
        sorted([f"c{i}".encode() for i in range(8)] * 2)
