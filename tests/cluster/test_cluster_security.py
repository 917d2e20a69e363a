"""ACLs and SCRAM credentials hold in every broker group of a cluster: a user created through one
group's master authenticates at every node of the others, and a binding created or deleted
through one group is in force everywhere (broker/cluster/security.py, through ZooKeeper, as
Kafka in ZooKeeper mode keeps them). Before, each group knew only what its own master had been
told."""

from __future__ import annotations

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion

from tests.kit.wire import WireClient
from tests.kit.group import wait_described
from tests.cluster.admin_calls import _topic_error, _until
from tests.security.acl_wire import (
    DENY,
    TOPIC_AUTHORIZATION_FAILED,
    Filter,
    create_acls,
    delete_acls,
    topic_acl,
)
from tests.cluster.security_calls import SETTINGS, _alter_users, _authenticates, _users

SASL_AUTHENTICATION_FAILED = 58
DESCRIBE = 8


def test_users_and_acls_made_through_one_group_hold_in_every_group(broker_group):
    a = broker_group(2, "a", first_id=1, **SETTINGS)
    b = broker_group(2, "b", first_id=3, **SETTINGS)
    plain = {n: node.listeners["PLAINTEXT"] for g in (a, b) for n, node in g.nodes.items()}
    sasl = {n: node.listeners["SASL_PLAINTEXT"] for g in (a, b) for n, node in g.nodes.items()}
    a_master, b_master = a.master(), b.master()

    carol = UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "carol-secret", iterations=4096)
    assert _alter_users(plain[a_master], carol) == [("carol", 0)]
    for node, address in sasl.items():  # every node of both groups, followers included
        _until(lambda node=node: "carol" in _users(plain[node]), True)
        assert _authenticates(address, "carol", "carol-secret") == 0

    admin = KafkaAdminClient(bootstrap_servers=",".join(plain.values()), request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic("hidden", 2, -1)])
    finally:
        admin.close()
    wait_described(",".join(plain.values()), "hidden", 2)
    deny = topic_acl("hidden", "User:ANONYMOUS", DESCRIBE, permission=DENY)
    client = WireClient(plain[b_master])
    try:
        assert [error for error, _ in create_acls(client, deny)] == [0]
    finally:
        client.close()
    for address in plain.values():
        _until(lambda address=address: _topic_error(address, "hidden"), TOPIC_AUTHORIZATION_FAILED)

    client = WireClient(plain[a_master])
    try:
        assert delete_acls(client, Filter(name="hidden"))[0][2] == [deny]
    finally:
        client.close()
    for address in plain.values():
        _until(lambda address=address: _topic_error(address, "hidden"), 0)

    assert _alter_users(plain[b_master], UserScramCredentialDeletion("carol", "SCRAM-SHA-256")) == [("carol", 0)]
    for node, address in sasl.items():
        _until(lambda node=node: "carol" in _users(plain[node]), False)
        assert _authenticates(address, "carol", "carol-secret") == SASL_AUTHENTICATION_FAILED
