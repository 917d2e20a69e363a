"""Gregor and Apache Kafka 3.9 side by side for the issue benchmarks (security_bench.py,
acl_bench.py, txn_bench.py): which brokers a run compares, and one broker of either kind
started with the same settings and SCRAM users, its listeners read back."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker_process import ROOT, BrokerProcess

if str(ROOT) not in sys.path:  # tests.kit starts the brokers
    sys.path.insert(0, str(ROOT))


def compared(gregor_only: bool) -> list[str]:
    """["gregor", "kafka"], without Kafka when asked or when its jars are not resolved."""
    if gregor_only:
        return ["gregor"]
    import kafka_process
    return ["gregor"] if kafka_process.unavailable() is not None else ["gregor", "kafka"]


@contextmanager
def started(kind: str, tmp: Path, settings: dict[str, str],
            users: list[tuple[str, str, str]] | None = None) -> Iterator[dict[str, str]]:
    """A fresh broker of `kind` ("gregor" or "kafka"); yields listener name -> "host:port"
    (only PLAINTEXT without a `listeners` setting), stops it after."""
    if kind == "kafka":
        from tests.kit.kafka import KafkaBroker
        kafka = KafkaBroker(tmp / "kafka", settings, users=users or [])
        kafka.start()
        listeners, stop = kafka.listeners or {"PLAINTEXT": kafka.bootstrap}, kafka.stop
    else:
        from tests.kit.gregor import add_users
        proc = BrokerProcess(tmp / "gregor", settings)
        if users:
            add_users(proc.data_dir, users)
        proc.start()
        proc.wait_idle()
        listeners, stop = proc.broker.listeners, proc.stop  # read back by the test kit's launcher
    try:
        yield listeners
    finally:
        stop()
