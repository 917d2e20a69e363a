"""A Gregor or a real Apache Kafka (3.9.0, or another release), for tests that run one scenario against both brokers
(a fixture parametrized over GREGOR and KAFKA enters `started` with its param)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.kit.gregor import BrokerProcess, start_broker
from tests.kit.inprocess import InProcessBroker
from tests.kit.kafka import KafkaBroker, KafkaUnavailable
from tests.kit.wire import WireClient

GREGOR, KAFKA = "gregor", "apache-kafka"


@contextmanager
def started(kind: str, tmp: Path, settings: dict[str, str],
            users: list[tuple[str, str, str]] | None = None,
            kafka_log_level: str = "WARN", in_process: bool = False,
            kafka_version: str | None = None) -> Iterator[BrokerProcess | KafkaBroker | InProcessBroker]:
    """The broker `kind` started with `settings` in `tmp`; stopped and its files removed after.
    `users` (name, password, SCRAM mechanism) exist before the first start (Gregor: `gregor user
    add`; Kafka: `kafka-storage format --add-scram` and PLAIN's JAAS entries). Without Kafka's
    jars the test skips saying so (bin/setup-kafka names what is missing). `kafka_log_level`: Kafka's
    log4j level, for a test that reads what Kafka logged. `in_process`: Gregor runs in the test
    process (tests/kit/inprocess.py), for tests where no process boundary is under test; `connect`
    then reaches it without a socket. `kafka_version`: another Kafka release than 3.9.0 (4.4.0 for
    the Kafka 4 features; the test carries the matching kafka_version mark)."""
    if kind == GREGOR and in_process:
        process = InProcessBroker(tmp / "data", **{"failed.authentication.limit": "0", **settings}).start()
    elif kind == GREGOR:
        # Kafka has no failed.authentication.limit; the scenarios fail on purpose, often, from one address
        process = start_broker(tmp, users=users, **{"failed.authentication.limit": "0", **settings})
    else:
        try:
            process = KafkaBroker(tmp / "kafka", settings, users=users, log_level=kafka_log_level,
                                  **({"version": kafka_version} if kafka_version else {}))
        except KafkaUnavailable as e:
            pytest.skip(f"NOT RUN against Apache Kafka: {e}")
        process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def connect(broker: BrokerProcess | KafkaBroker | InProcessBroker) -> WireClient:
    """A raw client of `broker`: over an in-memory stream for an in-process Gregor, a socket otherwise."""
    return broker.client() if isinstance(broker, InProcessBroker) else WireClient(broker.bootstrap)
