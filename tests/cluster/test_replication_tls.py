"""security.inter.broker.protocol=SSL: the replication port (the commitlog's shipping, and other
groups' transaction markers) speaks TLS, and both ends show a certificate the cluster's CA signed.

A group ships its log, fails over and commits transactions across groups through TLS; the port
refuses plaintext, a certificate of another CA, and (with an authorizer) a principal that is not
allowed ClusterAction, so a node with such a certificate never joins the sync-state set. A
refused certificate counts towards failed.authentication.limit at the port. A node's
certificate is renewed while it runs (listener.name.replication.ssl.keystore.location)."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from broker.cluster.shipping import HELLO, MAGIC, VERSION, WELCOME
from tests.security.brokers import STANDARD_AUTHORIZER
from tests.security.tls import Certificates, make_certificates, node_keystore, read_until_closed
from tests.cluster.secured import ship_fail_over_and_commit
from tests.kit.wait import wait_until

pytestmark = pytest.mark.clients
NODE_SUBJECT = "/O=Gregor tests/CN=gregor-node"
NODE_PRINCIPAL = "User:CN=gregor-node,O=Gregor tests"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> tuple[Certificates, dict[str, Path]]:
    directory = tmp_path_factory.mktemp("node-certs")
    made = make_certificates(directory)
    keystores = {"node": node_keystore(directory, "node", NODE_SUBJECT),
                 "intruder": node_keystore(directory, "intruder", "/O=Gregor tests/CN=intruder"),
                 "stranger": node_keystore(directory, "stranger-node", NODE_SUBJECT, ca="stranger")}
    return made, keystores


def ssl_settings(certs, keystore: str = "node") -> dict[str, str]:
    made, keystores = certs
    return {"security.inter.broker.protocol": "SSL", "ssl.keystore.location": str(keystores[keystore]),
            "ssl.truststore.location": str(made.ca)}


def welcome_over_tls(address: tuple[str, int], context: ssl.SSLContext) -> bytes:
    """What the replication port answers a follower's HELLO sent through TLS with `context`'s
    certificate: a WELCOME, or b"" when the handshake fails or the port closes the connection."""
    try:
        with socket.create_connection(address, timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=address[0]) as tls:
            tls.sendall(HELLO.pack(MAGIC, VERSION, 99, 0, 0))
            return tls.recv(WELCOME.size)
    except (ssl.SSLError, OSError):  # TLS 1.3: a refused client certificate shows at the first read
        return b""


def node_context(certs, keystore: str) -> ssl.SSLContext:
    made, keystores = certs
    context = ssl.create_default_context(cafile=str(made.ca))
    context.load_cert_chain(str(keystores[keystore]))
    return context


def test_groups_ship_fail_over_and_commit_transactions_through_tls(broker_group, certs):
    a = broker_group(2, "a", first_id=1, **ssl_settings(certs))
    b = broker_group(2, "b", first_id=3, **ssl_settings(certs))
    ship_fail_over_and_commit(a, b, "tls-spread")
    for node in (a, b):
        for process in node.nodes.values():
            assert "Traceback" not in process.log()


def test_the_replication_port_takes_only_nodes_the_cluster_trusts(broker_group, certs):
    settings = {**ssl_settings(certs), "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": NODE_PRINCIPAL}
    group = broker_group(3, start=False, **settings)
    group.nodes[3].settings.update(ssl_settings(certs, "intruder"))  # the cluster's CA, but not a super user
    for node in group.nodes.values():
        node.start(timeout=60)
    assert sorted(group.wait_sync_state_set(2)) == [1, 2]
    master = group.master()
    address = group.replication_address(master)
    # a node's certificate is welcomed: the checks below can fail
    assert WELCOME.unpack(welcome_over_tls(address, node_context(certs, "node")))[0] == 0
    assert welcome_over_tls(address, node_context(certs, "stranger")) == b""  # another CA
    assert welcome_over_tls(address, node_context(certs, "intruder")) == b""  # no ClusterAction
    with socket.create_connection(address, timeout=10) as raw:  # a plaintext follower
        raw.sendall(HELLO.pack(MAGIC, VERSION, 99, 0, 0))
        closed, received = read_until_closed(raw, 15)
    assert closed and received[:1] in (b"", b"\x15")  # nothing, or a TLS alert: never a WELCOME
    # node 3 is live and keeps trying: the master's refusal and node 3's answer show in their logs
    refused = "principal User:CN=intruder,O=Gregor tests is not allowed ClusterAction"
    wait_until(lambda: 3 in group.state()[1]
               and refused in group.nodes[master].log() and "TLS handshake failed" in group.nodes[master].log()
               and "closed the TLS connection before welcoming this node" in group.nodes[3].log(),
               30, "node 3's refused logins in both logs", interval=0.2)
    record, live = group.state()
    assert 3 in live and sorted(record["sync_state_set"]) == [1, 2]
    log = group.nodes[master].log()
    assert "principal User:CN=intruder,O=Gregor tests is not allowed ClusterAction" in log
    assert "TLS handshake failed" in log
    assert "closed the TLS connection before welcoming this node" in group.nodes[3].log()


def test_refused_certificates_count_as_failed_logins_at_the_port(broker_group, certs):
    group = broker_group(1, **ssl_settings(certs), **{"failed.authentication.limit": "2"})
    master = group.master()
    address = group.replication_address(master)
    assert welcome_over_tls(address, node_context(certs, "stranger")) == b""  # another CA: refused, counted
    with socket.create_connection(address, timeout=10) as raw:  # a plaintext follower: refused, not counted
        raw.sendall(HELLO.pack(MAGIC, VERSION, 99, 0, 0))
        assert read_until_closed(raw, 15)[0]
    assert WELCOME.unpack(welcome_over_tls(address, node_context(certs, "node")))[0] == 0
    assert welcome_over_tls(address, node_context(certs, "stranger")) == b""
    assert welcome_over_tls(address, node_context(certs, "node")) == b""  # the limit: closed as accepted
    assert "failed.authentication.limit (2 within 60000 ms) reached for 127.0.0.1" in group.nodes[master].log()


def replication_serial(address: tuple[str, int], context: ssl.SSLContext) -> str:
    with socket.create_connection(address, timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=address[0]) as tls:
        return tls.getpeercert()["serialNumber"]


def test_a_nodes_certificate_is_renewed_without_a_restart_at_the_master_and_at_a_follower(broker_group, certs):
    """listener.name.replication.ssl.keystore.location (broker/security/dynamic_tls.py): the node's new
    certificate on both ends of the replication port; a follower's change goes through ZooKeeper
    and its master's commitlog, as ACLs do, and outlives the failover that follows."""
    group = broker_group(2, **ssl_settings(certs))
    assert sorted(group.wait_sync_state_set(2)) == [1, 2]
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    client = node_context(certs, "node")
    renewed = {n: node_keystore(certs[0].ca.parent, f"renewed-{n}", NODE_SUBJECT) for n in group.nodes}
    before = {n: replication_serial(group.replication_address(n), client) for n in group.nodes}
    for n in (master, follower):
        admin = AdminClient({"bootstrap.servers": group.address(n)})
        resource = ConfigResource(ResourceType.BROKER, str(n), incremental_configs=[ConfigEntry(
            "listener.name.replication.ssl.keystore.location", str(renewed[n]),
            incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
        after = replication_serial(group.replication_address(n), client)
        assert after != before[n], f"node {n} serves its old certificate"
    group.kill(master)  # the follower leads; the old master returns on its renewed certificate and follows
    assert group.master(other_than=master) == follower
    group.restart(master)
    assert sorted(group.wait_sync_state_set(2)) == [1, 2]
    assert replication_serial(group.replication_address(master), client) != before[master]
    for process in group.nodes.values():
        assert "Traceback" not in process.log()
