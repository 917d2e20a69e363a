"""broker/security/acl.py against Kafka 3.9's StandardAuthorizer rules, without a broker (the same rules
run end to end against Gregor and a real Kafka in tests/security/test_acls.py)."""

from __future__ import annotations

import pytest

from broker.security.acl import Acl, AclFilter, Authorizer, Op, Pattern, Perm, Res, creation_problem

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"


def acl(name="orders", op=Op.READ, perm=Perm.ALLOW, principal=ALICE, host="*", pattern=Pattern.LITERAL,
        rtype=Res.TOPIC) -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls: Acl, supers: str = "", allow_if_none: bool = False) -> Authorizer:
    a = Authorizer(supers, allow_if_none)
    a.replace(set(acls))
    return a


def test_literal_prefixed_and_wildcard_patterns_match_as_kafka_matches_them():
    a = authorizer(acl("orders"), acl("pay", pattern=Pattern.PREFIXED, op=Op.WRITE), acl("*", op=Op.DELETE))
    assert a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders2")  # a literal is not a prefix
    assert a.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "payments")
    assert not a.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "pa")
    assert a.authorize(ALICE, HOST, Op.DELETE, Res.TOPIC, "anything")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.GROUP, "orders")  # another resource type


def test_read_write_delete_alter_imply_describe_only_when_allowed():
    a = authorizer(acl(op=Op.WRITE), acl("cfg", op=Op.ALTER_CONFIGS))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, Res.TOPIC, "cfg")
    denied_read = authorizer(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY))
    assert denied_read.authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "orders")  # a DENY implies nothing


def test_deny_wins_over_allow_and_all_covers_every_operation():
    a = authorizer(acl(op=Op.ALL), acl("ord", pattern=Pattern.PREFIXED, op=Op.READ, perm=Perm.DENY))
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    assert a.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "orders")
    assert not authorizer(acl(op=Op.READ), acl(op=Op.ALL, perm=Perm.DENY)).authorize(
        ALICE, HOST, Op.READ, Res.TOPIC, "orders")


def test_principal_and_host_must_match_or_be_wildcards():
    a = authorizer(acl(principal="User:*", host="10.0.0.1"), acl(op=Op.WRITE, principal=BOB))
    assert a.authorize(BOB, "10.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert not a.authorize(BOB, HOST, Op.READ, Res.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "orders")


def test_super_users_and_the_no_acl_default():
    a = authorizer(acl(principal=BOB), supers="User:admin; User:CN=ops,O=acme")
    assert a.authorize("User:admin", HOST, Op.ALTER, Res.CLUSTER, "kafka-cluster")
    assert a.authorize("User:CN=ops,O=acme", HOST, Op.DELETE, Res.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "unnamed")
    open_ = authorizer(acl(principal=BOB), allow_if_none=True)
    assert open_.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "unnamed")  # no ACL names it
    assert not open_.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")  # bob's ACL names it


def test_decisions_follow_a_replaced_set_of_bindings():
    a = authorizer(acl())
    assert a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    a.replace(set())
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")


def test_authorize_by_resource_type_needs_an_allow_not_covered_by_a_deny():
    assert authorizer(acl("x", op=Op.WRITE)).authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer(acl("x", op=Op.READ)).authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    covered = authorizer(acl("xy", op=Op.WRITE), acl("x", op=Op.WRITE, perm=Perm.DENY, pattern=Pattern.PREFIXED))
    assert not covered.authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer(acl("x", op=Op.WRITE), acl("*", op=Op.WRITE, perm=Perm.DENY)).authorize_any(
        ALICE, HOST, Op.WRITE, Res.TOPIC)


def test_a_binding_round_trips_through_its_state_key():
    binding = acl("prefix-é", pattern=Pattern.PREFIXED, principal="User:CN=a,O=b", host="::1", op=Op.IDEMPOTENT_WRITE)
    assert Acl.from_key(binding.key()) == binding


@pytest.mark.parametrize(("flt", "hits"), [
    (AclFilter(Res.ANY, None, Pattern.ANY, None, None, Op.ANY, Perm.ANY), {"orders", "ord", "*"}),
    (AclFilter(Res.TOPIC, "orders", Pattern.ANY, None, None, Op.ANY, Perm.ANY), {"orders"}),
    (AclFilter(Res.TOPIC, "orders", Pattern.MATCH, None, None, Op.ANY, Perm.ANY), {"orders", "ord", "*"}),
    (AclFilter(Res.TOPIC, None, Pattern.PREFIXED, None, None, Op.ANY, Perm.ANY), {"ord"}),
    (AclFilter(Res.TOPIC, None, Pattern.ANY, BOB, None, Op.ANY, Perm.ANY), set()),
    (AclFilter(Res.TOPIC, None, Pattern.ANY, None, None, Op.READ, Perm.ANY), {"orders", "*"}),
])
def test_filters_select_bindings_as_kafkas_acl_binding_filter(flt, hits):
    a = authorizer(acl("orders"), acl("ord", pattern=Pattern.PREFIXED, op=Op.WRITE), acl("*"))
    assert {b.name for b in a.matching(flt)} == hits


def test_invalid_bindings_are_refused_in_kafkas_words():
    assert creation_problem(acl("other", rtype=Res.CLUSTER)) == (
        "The only valid name for the CLUSTER resource is kafka-cluster")
    assert creation_problem(acl(rtype=Res.ANY)) == "Invalid resourceType ANY"
    assert creation_problem(acl(pattern=Pattern.MATCH)) == "Invalid patternType MATCH"
    assert creation_problem(acl(op=Op.ANY)) == "Invalid operation ANY"
    assert creation_problem(acl(perm=Perm.ANY)) == "Invalid permissionType ANY"
    assert creation_problem(acl("")) == "Invalid empty resource name"
    assert creation_problem(acl()) is None
