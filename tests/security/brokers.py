"""Gregor and a real Apache Kafka 3.9.0 configured alike for SASL: a PLAINTEXT and a SASL_PLAINTEXT
listener, PLAIN and SCRAM enabled, and the same users created before the first start (Gregor with
`broker user add`, Kafka with `kafka-storage format --add-scram` plus PLAIN's JAAS entries)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess, start_broker
from tests.oracle.both import GREGOR
from tests.oracle.kafka_broker import KafkaBroker, KafkaUnavailable

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "alice", "alice-secret"
USERS = [(USER, PASSWORD, mechanism) for mechanism in SCRAM]

SASL_SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
}


@contextmanager
def started(kind: str, tmp: Path, settings: dict[str, str],
            users: list[tuple[str, str, str]]) -> Iterator[BrokerProcess | KafkaBroker]:
    """tests/oracle/both.started with SCRAM users added before the first start."""
    if kind == GREGOR:
        process = start_broker(tmp, users=users, **settings)
    else:
        try:
            process = KafkaBroker(tmp / "kafka", settings, users=users)
        except KafkaUnavailable as e:
            pytest.skip(f"NOT RUN against Apache Kafka: {e}")
        process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(tmp, ignore_errors=True)
