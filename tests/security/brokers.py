"""Gregor and a real Apache Kafka 3.9.0 configured alike for SASL: a PLAINTEXT and a SASL_PLAINTEXT
listener, PLAIN and SCRAM enabled, and the same users created before the first start (Gregor with
`broker user add`, Kafka with `kafka-storage format --add-scram` plus PLAIN's JAAS entries)."""

from __future__ import annotations

from tests.kit.both import started  # noqa: F401  (re-exported for the scenarios)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "alice", "alice-secret"
USERS = [(USER, PASSWORD, mechanism) for mechanism in SCRAM]

SASL_SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
}

# ACLs (tests/security/test_acls.py): Kafka's KRaft controller and inter-broker traffic come in on the
# PLAINTEXT listener as User:ANONYMOUS, which must therefore be a super user; the PLAINTEXT listener is
# then the tests' admin path on both brokers. admin is a super user over SASL, alice and bob are not.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_USERS = [(name, f"{name}-secret", mechanism) for name in ("admin", "alice", "bob") for mechanism in SCRAM]
ACL_SETTINGS = {
    **SASL_SETTINGS,
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:ANONYMOUS;User:admin",
    "group.initial.rebalance.delay.ms": "0",
}
