"""`gregor acl add|list|remove` against a live Gregor and a real Apache Kafka 3.9.0 with
StandardAuthorizer, a PLAINTEXT listener (User:ANONYMOUS, a super user: the admin path) and a
SASL_PLAINTEXT one (admin a super user, alice not): the bindings round trip, really decide whether
alice may produce, and are changed over SASL with --command-config. Kafka applies an ACL change
asynchronously (its authorizer follows the metadata log), so the checks after a change poll."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError

from broker.cli.connect import CliError, command_config
from tests.cli.conftest import Done, assert_fails, gregor
from tests.kit.both import GREGOR, KAFKA, started
from tests.kit.wait import wait_until

pytestmark = pytest.mark.clients

USERS = [("admin", "admin-secret", "SCRAM-SHA-256"), ("alice", "alice-secret", "SCRAM-SHA-256")]
SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "auto.create.topics.enable": "false",
}
HEADER = ["RESOURCE-TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
ADMIN_PROPERTIES = """\
# as Kafka's tools take it: the JAAS line continued with a backslash
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="admin" password="admin-secret";
"""
ALICE_PROPERTIES = """\
security.protocol: SASL_PLAINTEXT
sasl.mechanism: SCRAM-SHA-256
sasl.username: alice
sasl.password: alice-secret
"""


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(f"acl-{request.param}"), SETTINGS, USERS) as b:
        yield b


def acl(broker, *args: str, via: str = "PLAINTEXT") -> Done:
    return gregor("acl", *args, "--bootstrap", broker.listeners[via])


def rows(done: Done) -> list[list[str]]:
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines()]


def produce_as_alice(broker, topic: str) -> str | None:
    """None when alice's record was written, else the error's name. Without idempotence, so that a
    refusal is about the topic (an idempotent producer first needs IdempotentWrite or a Write ACL)."""
    producer = KafkaProducer(bootstrap_servers=broker.listeners["SASL_PLAINTEXT"], security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret", enable_idempotence=False, retries=0,
                             max_block_ms=10_000)
    try:
        producer.send(topic, b"from alice").get(timeout=10)
        return None
    except KafkaError as exc:
        return type(exc).__name__
    finally:
        producer.close(timeout=5)


def test_add_list_remove_round_trip(broker, topic_name):
    group = f"{topic_name}-billing"
    added = acl(broker, "add", "--principal", "User:alice", "--operation", "read,Write", "--topic", topic_name)
    assert added.stdout.splitlines() == [f"added ACL: User:alice ALLOW READ on TOPIC {topic_name} (LITERAL) from host *",
                                         f"added ACL: User:alice ALLOW WRITE on TOPIC {topic_name} (LITERAL) from host *"]
    assert acl(broker, "add", "--deny", "--principal", "User:alice", "--host", "10.0.0.1", "--operation",
               "Describe", "--group", group, "--prefixed").returncode == 0
    topic_rows = [["TOPIC", "LITERAL", topic_name, "User:alice", "*", op, "ALLOW"] for op in ("READ", "WRITE")]
    group_row = ["GROUP", "PREFIXED", group, "User:alice", "10.0.0.1", "DESCRIBE", "DENY"]
    wait_until(lambda: len(rows(acl(broker, "list", "--principal", "User:alice"))) == 4, 20,
               "alice's four ACLs listed", interval=0.2)

    listed = rows(acl(broker, "list", "--principal", "User:alice"))
    assert listed[0] == HEADER and sorted(listed[1:]) == sorted([*topic_rows, group_row])
    assert acl(broker, "list", "--topic", topic_name, "-o", "json").json() == [
        {"resource_type": "TOPIC", "pattern_type": "LITERAL", "resource_name": topic_name, "principal": "User:alice",
         "host": "*", "operation": op, "permission": "ALLOW"} for op in ("READ", "WRITE")]
    assert rows(acl(broker, "list", "--group", f"{group}-eu", "--match"))[1:] == [group_row]
    assert rows(acl(broker, "list", "--group", f"{group}-eu"))[1:] == []  # LITERAL unless --match

    removed = acl(broker, "remove", "--topic", topic_name, "--operation", "Write")
    assert rows(removed) == [HEADER, topic_rows[1]]
    removed = acl(broker, "remove", "--principal", "User:alice", "--host", "10.0.0.1", "-o", "json")
    assert [r["resource_name"] for r in removed.json()] == [group]
    assert acl(broker, "remove", "--group", group, "--prefixed").stdout == "no ACL matched: nothing removed\n"
    wait_until(lambda: rows(acl(broker, "list", "--principal", "User:alice")) == [HEADER, topic_rows[0]], 20,
               "only alice's READ ACL listed", interval=0.2)
    assert rows(acl(broker, "remove", "--topic", topic_name)) == [HEADER, topic_rows[0]]


def test_the_acls_decide_whether_alice_may_produce(broker, topic_name):
    assert gregor("topic", "create", topic_name, "--bootstrap", broker.listeners["PLAINTEXT"]).returncode == 0
    assert produce_as_alice(broker, topic_name) == "TopicAuthorizationFailedError"  # no ACL: no one but super users

    acl(broker, "add", "--principal", "User:alice", "--operation", "Write", "--topic", topic_name)
    wait_until(lambda: produce_as_alice(broker, topic_name) is None, 20, "alice's produce allowed", interval=0.2)

    acl(broker, "add", "--deny", "--principal", "User:*", "--operation", "All", "--topic", topic_name[:8],
        "--prefixed")
    wait_until(lambda: produce_as_alice(broker, topic_name) == "TopicAuthorizationFailedError", 20,
               "alice's produce refused", interval=0.2)  # DENY wins

    assert len(rows(acl(broker, "remove", "--deny", "--principal", "User:*"))) == 2
    wait_until(lambda: produce_as_alice(broker, topic_name) is None, 20, "alice's produce allowed again",
               interval=0.2)
    acl(broker, "remove", "--topic", topic_name)


def test_command_config_signs_in_over_sasl_and_alice_is_refused_in_one_line(broker, topic_name, tmp_path):
    (tmp_path / "admin.properties").write_text(ADMIN_PROPERTIES)
    (tmp_path / "alice.properties").write_text(ALICE_PROPERTIES)
    as_admin = ("--command-config", str(tmp_path / "admin.properties"))
    as_alice = ("--command-config", str(tmp_path / "alice.properties"))

    added = acl(broker, "add", *as_admin, "--principal", "User:bob", "--operation", "Read", "--group", topic_name,
                via="SASL_PLAINTEXT")
    assert added.returncode == 0, added.stderr
    wait_until(lambda: len(rows(acl(broker, "list", *as_admin, "--group", topic_name, via="SASL_PLAINTEXT"))) == 2,
               20, "bob's group ACL listed over SASL", interval=0.2)

    assert_fails(acl(broker, "list", *as_alice, via="SASL_PLAINTEXT"), 1,
                 "cannot list ACLs: not authorized: User:alice needs DESCRIBE on the cluster")
    assert_fails(acl(broker, "add", *as_alice, "--principal", "User:alice", "--operation", "All", "--cluster",
                     via="SASL_PLAINTEXT"), 1, "cannot add ACLs: not authorized: User:alice needs ALTER on the cluster")
    assert_fails(acl(broker, "remove", *as_alice, "--group", topic_name, via="SASL_PLAINTEXT"), 1,
                 "cannot remove ACLs: not authorized: User:alice needs ALTER on the cluster")

    removed = acl(broker, "remove", *as_admin, "--group", topic_name, via="SASL_PLAINTEXT")
    assert rows(removed)[1:] == [["GROUP", "LITERAL", topic_name, "User:bob", "*", "READ", "ALLOW"]]


def test_a_broker_without_an_authorizer_says_acls_are_off(target):
    off = "ACLs are off on this broker: set authorizer.class.name"
    assert_fails(target("acl", "list"), 1, "cannot list ACLs: " + off)
    assert_fails(target("acl", "add", "--principal", "User:alice", "--operation", "Read", "--topic", "t"), 1, off)
    assert_fails(target("acl", "remove", "--principal", "User:alice"), 1, off)


@pytest.mark.parametrize(("args", "fragment"), [
    (("add", "--principal", "User:alice", "--operation", "Reed", "--topic", "t"),
     "unknown operation 'Reed' (one of All, Read, Write"),
    (("add", "--principal", "alice", "--operation", "Read", "--topic", "t"), "expected a principal TYPE:NAME"),
    (("add", "--principal", "User:alice", "--operation", "Read"), "one of the arguments --topic --group"),
    (("add", "--principal", "User:alice", "--operation", "Read", "--topic", ""), "must not be empty"),
    (("add", "--principal", "User:alice", "--operation", "Read", "--cluster"), "CLUSTER does not support READ"),
    (("list", "--topic", "t", "--prefixed", "--match"), "not allowed with argument --prefixed"),
    (("remove",), "no filter given: this would remove every ACL"),
    (("remove", "--match"), "no filter given"),
    (("remove", "--all", "--topic", "t"), "--all removes every ACL: give it without"),
])
def test_bad_arguments_are_usage_errors_before_any_connection(args, fragment):
    assert_fails(gregor("acl", *args, "--bootstrap", "127.0.0.1:1"), 2, fragment)


def test_command_config_becomes_kafka_python_settings(tmp_path):
    pem = tmp_path / "client.pem"
    pem.write_text("key and certificate")
    (tmp_path / "tls.properties").write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                                             f"ssl.truststore.location={pem}\nssl.keystore.location={pem}\n"
                                             f"ssl.endpoint.identification.algorithm=\n")
    assert command_config(str(tmp_path / "tls.properties")) == {
        "security_protocol": "SSL", "ssl_cafile": str(pem), "ssl_certfile": str(pem), "ssl_keyfile": str(pem),
        "ssl_check_hostname": False}
    (tmp_path / "admin.properties").write_text(ADMIN_PROPERTIES)
    assert command_config(str(tmp_path / "admin.properties")) == {
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "admin", "sasl_plain_password": "admin-secret"}


@pytest.mark.parametrize(("text", "fragment"), [
    ("security.protocol=PLAINTEXT\nbootstrap.servers=x\nretries=3\n", "unknown bootstrap.servers, retries (known: "),
    ("ssl.truststore.type=JKS\n", "ssl.truststore.type=JKS: only PEM files can be read"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required;\n",
     'sasl.jaas.config needs username="..." and password="..."'),
    ("security.protocol=SASL_SSL\n", "SASL_SSL needs sasl.mechanism and sasl.jaas.config"),
    ("ssl.truststore.location=/no/such.pem\n", "ssl.truststore.location: no file /no/such.pem"),
    ("just words\n", "line 1: expected KEY=VALUE"),
])
def test_a_bad_command_config_is_named_in_one_line(tmp_path, text, fragment):
    (tmp_path / "client.properties").write_text(text)
    with pytest.raises(CliError, match="--command-config") as refused:
        command_config(str(tmp_path / "client.properties"))
    assert fragment in str(refused.value) and refused.value.status == 2
    done = gregor("acl", "list", "--command-config", str(tmp_path / "client.properties"), "--bootstrap", "127.0.0.1:1")
    assert_fails(done, 2, fragment)


def test_every_client_command_reaches_the_sasl_listener_with_command_config(broker, topic_name, tmp_path):
    """topic create, produce, consume with a group, group list/describe and query by time, all as
    alice over SASL_PLAINTEXT once the ACLs allow her; refused in one line before they do."""
    (tmp_path / "admin.properties").write_text(ADMIN_PROPERTIES)
    (tmp_path / "alice.properties").write_text(ALICE_PROPERTIES)
    sasl = ("--bootstrap", broker.listeners["SASL_PLAINTEXT"])
    as_admin = (*sasl, "--command-config", str(tmp_path / "admin.properties"))
    as_alice = (*sasl, "--command-config", str(tmp_path / "alice.properties"))
    group = f"{topic_name}-readers"

    created = gregor("topic", "create", topic_name, "--partitions", "1", *as_admin)
    assert created.returncode == 0, created.stderr
    assert_fails(gregor("produce", topic_name, *as_alice, stdin=b"refused\n"), 1, "TOPIC_AUTHORIZATION_FAILED")
    for args in (("--operation", "Write,Read", "--topic", topic_name), ("--operation", "Read", "--group", group)):
        added = gregor("acl", "add", *as_admin, "--principal", "User:alice", *args)
        assert added.returncode == 0, added.stderr
    wait_until(lambda: gregor("produce", topic_name, *as_alice, stdin=b"one\ntwo\n").returncode == 0, 20,
               "alice's produce through the CLI", interval=0.2)

    consumed = gregor("consume", topic_name, *as_alice, "--group", group, "--from-beginning", "--max-messages", "2")
    assert (consumed.returncode, consumed.stdout.split()[-2:]) == (0, ["one", "two"]), consumed.stderr
    described = gregor("group", "describe", group, *as_alice, "-o", "json")
    assert described.returncode == 0 and group in described.stdout, described.stderr
    by_time = gregor("query", "--topic", topic_name, "--from", "1970-01-01T00:00:00Z", *as_alice)
    assert by_time.returncode == 0 and '"one"' in by_time.stdout and '"two"' in by_time.stdout, by_time.stderr
