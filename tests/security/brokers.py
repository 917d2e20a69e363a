"""Gregor and a real Apache Kafka 3.9.0 configured alike for SASL: a PLAINTEXT and a SASL_PLAINTEXT
listener, PLAIN and SCRAM enabled, and the same users created before the first start (Gregor with
`broker user add`, Kafka with `kafka-storage format --add-scram` plus PLAIN's JAAS entries)."""

from __future__ import annotations

from tests.oracle.both import started  # noqa: F401  (re-exported for the scenarios)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "alice", "alice-secret"
USERS = [(USER, PASSWORD, mechanism) for mechanism in SCRAM]

SASL_SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
}
