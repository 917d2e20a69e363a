"""security.inter.broker.protocol=SASL_PLAINTEXT or SASL_SSL: a node logs in to another's
replication port (the commitlog's shipping, and other groups' transaction markers) as the user of
its sasl.jaas.config, checked against the SCRAM credentials in the commitlog, as a SASL
listener checks a client (broker/cluster/sasl.py).

Groups ship their logs, fail over and commit transactions across groups with SCRAM between the
nodes; the port refuses a wrong password, an unknown mechanism, a user not allowed
ClusterAction (with an authorizer) and a node that does not log in, so such a node never joins
the sync-state set, and joins once its login is right; with SASL_SSL the login goes through TLS.
A node whose user loses ClusterAction is cut off until it has it again, and repeated failed
logins close the port to their address (broker/cluster/access.py)."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.net.sasl.scram import ScramClient

from broker.cluster.sasl import ANSWER, GO_ON, LOGGED_IN, LOGIN, MAGIC, REFUSED, TOKEN
from broker.cluster.shipping import HELLO, VERSION, WELCOME
from broker.cluster.shipping import MAGIC as HELLO_MAGIC
from tests.kit.group import BrokerGroup
from tests.cluster.load import create_topic
from tests.cluster.secured import ship_fail_over_and_commit
from tests.kit.gregor import add_users
from tests.kit.wait import wait_until
from tests.security.brokers import STANDARD_AUTHORIZER
from tests.security.tls import make_certificates, node_keystore, read_until_closed

pytestmark = pytest.mark.clients
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
USERS = [("node", "node-secret", "SCRAM-SHA-512"), ("node", "node-secret", "SCRAM-SHA-256"),
         ("intruder", "intruder-secret", "SCRAM-SHA-256")]


def sasl_settings(mechanism: str = "SCRAM-SHA-512", password: str = "node-secret",
                  protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    return {"security.inter.broker.protocol": protocol, "sasl.mechanism.inter.broker.protocol": mechanism,
            "sasl.jaas.config": f'{SCRAM_LOGIN} required username="node" password="{password}";'}


def started(group: BrokerGroup, in_sync: int) -> BrokerGroup:
    """Start a group made with start=False: its first node with the users added to its data dir
    (`gregor user add`, before its first start), then, once it leads, the others, which get the
    users by replication after logging in with them (docs/replication.md, Security between nodes)."""
    first, *others = group.nodes.values()
    add_users(first.data_dir, USERS)
    first.start(timeout=60)
    group.master()
    for node in others:
        node.start(timeout=60)
    group.wait_sync_state_set(in_sync)
    return group


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def login(sock: socket.socket, mechanism: str, user: str, password: str) -> tuple[int, bytes]:
    """broker/cluster/sasl.py's login, written out on a blocking socket: (last status, its bytes)."""
    name = mechanism.encode()
    sock.sendall(LOGIN.pack(MAGIC, len(name)) + name)
    scram = ScramClient(user, password, mechanism) if mechanism.startswith("SCRAM") else None
    token = scram.first_message() if scram else b"\0" + user.encode() + b"\0" + password.encode()
    while True:
        sock.sendall(TOKEN.pack(len(token)) + token)
        status, size = ANSWER.unpack(_exactly(sock, ANSWER.size))
        answer = _exactly(sock, size)
        if status != GO_ON:
            return status, answer
        scram.process_server_first_message(answer)
        token = scram.final_message()


def welcome_after_login(address: tuple[str, int], mechanism: str, user: str, password: str) -> tuple[int, bytes]:
    """(login status, then the WELCOME to a HELLO after a successful login, or the refusal's text)."""
    with socket.create_connection(address, timeout=15) as sock:
        status, answer = login(sock, mechanism, user, password)
        if status != LOGGED_IN:
            return status, answer
        sock.sendall(HELLO.pack(HELLO_MAGIC, VERSION, 99, 0, 0))
        return status, _exactly(sock, WELCOME.size)


def test_groups_ship_fail_over_and_commit_transactions_with_scram_between_nodes(broker_group):
    settings = {**sasl_settings(), "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": "User:ANONYMOUS;User:node"}  # the clients (PLAINTEXT listener) and the nodes
    a = started(broker_group(2, "a", first_id=1, start=False, **settings), 2)  # in sync: logged in as node
    b = started(broker_group(2, "b", first_id=3, start=False, **settings), 2)
    old = ship_fail_over_and_commit(a, b, "sasl-spread")  # the log and the markers after SCRAM logins
    a.restart(old)  # logs in to the new master and catches up
    assert sorted(a.wait_sync_state_set(2)) == [1, 2]
    for group in (a, b):
        for process in group.nodes.values():
            assert "Traceback" not in process.log()
            assert "SASL login failed" not in process.log()


def test_the_replication_port_takes_only_a_node_that_logs_in_as_one(broker_group):
    settings = {**sasl_settings("SCRAM-SHA-256"), "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": "User:ANONYMOUS;User:node", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                # node 2 fails its login every second until it is put right, and must then be let in
                # at once: the limit on repeated failures has its own test below
                "failed.authentication.limit": "0"}
    group = broker_group(2, start=False, **settings)
    group.nodes[2].settings.update(sasl_settings("SCRAM-SHA-256", password="not-the-secret"))
    started(group, 1)
    master = group.master()
    assert master == 1, "node 2 cannot log in, so it never became master"
    address = group.replication_address(master)
    # the node's own login is welcomed: the refusals below can fail
    assert welcome_after_login(address, "SCRAM-SHA-256", "node", "node-secret")[0] == LOGGED_IN
    assert WELCOME.unpack(welcome_after_login(address, "PLAIN", "node", "node-secret")[1])[0] == 0
    status, why = welcome_after_login(address, "SCRAM-SHA-256", "node", "not-the-secret")
    assert status == REFUSED and b"invalid credentials" in why
    status, why = welcome_after_login(address, "PLAIN", "intruder", "intruder-secret")
    assert status == REFUSED
    assert why == b"principal User:intruder is not allowed ClusterAction on the cluster (super.users or an ACL)"
    status, why = welcome_after_login(address, "GSSAPI", "node", "node-secret")
    assert status == REFUSED and b"mechanism 'GSSAPI' is not one this node accepts" in why
    with socket.create_connection(address, timeout=10) as raw:  # a node without SASL
        raw.sendall(HELLO.pack(HELLO_MAGIC, VERSION, 99, 0, 0))
        closed, received = read_until_closed(raw, 15)
    assert closed and received == b""
    # node 2 is live and keeps trying: its refused logins show in both nodes' logs
    wait_until(lambda: 2 in group.state()[1] and "SASL login failed" in group.nodes[master].log()
               and f"cannot follow master {master}" in group.nodes[2].log()
               and "SASL login failed" in group.nodes[2].log(), 30, "node 2's refused logins in both logs",
               interval=0.2)
    record, live = group.state()
    assert 2 in live and record["sync_state_set"] == [1]
    assert "SASL login failed" in group.nodes[master].log()
    assert f"cannot follow master {master}" in group.nodes[2].log()
    assert "SASL login failed" in group.nodes[2].log()
    group.kill(2)  # its password put right: it logs in and joins
    group.nodes[2].settings.update(sasl_settings("SCRAM-SHA-256"))
    group.restart(2)
    assert sorted(group.wait_sync_state_set(2)) == [1, 2]


def test_sasl_ssl_logs_in_through_tls_without_node_certificates(broker_group, tmp_path):
    certs = make_certificates(tmp_path / "certs")
    keystore = node_keystore(tmp_path / "certs", "node", "/O=Gregor tests/CN=gregor-node")
    settings = {**sasl_settings(protocol="SASL_SSL"), "ssl.keystore.location": str(keystore),
                "ssl.truststore.location": str(certs.ca)}
    group = started(broker_group(3, start=False, **settings), 3)
    create_topic(group, "sasl-ssl", 1)
    producer = KafkaProducer(bootstrap_servers=group.bootstrap, acks="all")
    for i in range(20):
        producer.send("sasl-ssl", f"v{i}".encode(), partition=0).get(30)
    producer.close()
    old = group.master()
    group.kill(old)
    group.master(other_than=old)  # what it holds came through TLS after a SASL login
    consumer = KafkaConsumer(bootstrap_servers=group.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15000)
    consumer.assign([TopicPartition("sasl-ssl", 0)])
    values = []
    for message in consumer:  # until the 20 acknowledged records, or 15 s without one
        values.append(message.value)
        if len(values) == 20:
            break
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(20)]
    address = group.replication_address(group.master())
    with socket.create_connection(address, timeout=10) as raw:  # a login without TLS is no TLS handshake
        name = b"SCRAM-SHA-512"
        raw.sendall(LOGIN.pack(MAGIC, len(name)) + name)
        closed, received = read_until_closed(raw, 15)
    assert closed and received[:1] in (b"", b"\x15")  # nothing, or a TLS alert
    context = ssl.create_default_context(cafile=str(certs.ca))  # no client certificate: SASL says who
    with socket.create_connection(address, timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=address[0]) as tls:
        assert login(tls, "SCRAM-SHA-512", "node", "node-secret")[0] == LOGGED_IN


def test_a_node_that_loses_cluster_action_is_cut_off_until_allowed_again(broker_group):
    """Kafka authorizes each replica fetch, so a deleted ACL stops the next one; a follower's
    stream is one exchange, so its connection is closed instead, and its next login refused."""
    settings = {**sasl_settings(), "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": "User:ANONYMOUS",  # the clients (PLAINTEXT listener); the nodes by ACL only
                "replica.lag.time.max.ms": "3000"}
    group = broker_group(2, start=False, **settings)
    first, second = group.nodes.values()
    add_users(first.data_dir, USERS)
    first.start(timeout=60)
    master = group.master()
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:node", "*",
                         AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        assert future.result(timeout=30) is None
    second.start(timeout=60)
    assert sorted(group.wait_sync_state_set(2)) == [1, 2]

    cluster_filter = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
    for future in admin.delete_acls([cluster_filter]).values():
        assert future.result(timeout=30) == [binding]
    deadline = time.monotonic() + 30
    while group.state()[0]["sync_state_set"] != [master]:
        assert time.monotonic() < deadline, "the node without ClusterAction stayed in the sync-state set"
        time.sleep(0.2)
    assert ("closing the replication connection of User:node from 127.0.0.1: it is no longer allowed "
            "ClusterAction on the cluster") in group.nodes[master].log()
    # its logins meanwhile are refused
    wait_until(lambda: "principal User:node is not allowed ClusterAction" in group.nodes[master].log(), 30,
               "the master's refusal of the node's next login", interval=0.2)
    assert group.state()[0]["sync_state_set"] == [master]

    for future in admin.create_acls([binding]).values():
        assert future.result(timeout=30) is None
    assert sorted(group.wait_sync_state_set(2)) == [1, 2]


def test_repeated_failed_logins_close_the_port_to_their_address_and_not_the_listeners(broker_group):
    group = started(broker_group(1, start=False, **sasl_settings(), **{"failed.authentication.limit": "3"}), 1)
    master = group.master()
    address = group.replication_address(master)
    for _ in range(3):
        assert welcome_after_login(address, "SCRAM-SHA-512", "node", "a-guess")[0] == REFUSED
    with pytest.raises(ConnectionError):  # the right password too: closed as it is accepted, unanswered
        welcome_after_login(address, "SCRAM-SHA-512", "node", "node-secret")
    assert ("failed.authentication.limit (3 within 60000 ms) reached for 127.0.0.1"
            in group.nodes[master].log())
    admin = AdminClient({"bootstrap.servers": group.bootstrap})  # the port keeps its own count
    assert admin.list_topics(timeout=15).brokers
