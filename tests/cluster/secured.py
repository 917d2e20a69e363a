"""A secured group's round trip: ship, fail over, commit, through whatever the nodes' listeners ask."""

from __future__ import annotations

from tests.cluster.load import create_topic
from tests.cluster.transactions import transactions_read_committed
from tests.kit.group import BrokerGroup, wait_described


def ship_fail_over_and_commit(a: BrokerGroup, b: BrokerGroup, topic: str) -> int:
    """Two groups in sync (so the log went between their nodes): a topic spread over both, a
    committed and an aborted transaction over it (the coordinator's markers for the other group go
    over its replication port too), group a's master killed, and one more transaction read
    through a's new master, which holds what came to it between the nodes. The killed node."""
    boot = f"{a.bootstrap},{b.bootstrap}"
    create_topic(a, topic, 4)
    parts = wait_described(boot, topic, 4)
    assert {p["leader_id"] for p in parts} == {a.master(), b.master()}
    assert sorted(transactions_read_committed(boot, topic, (True, False))) == \
        sorted(f"c{i}".encode() for i in range(8))
    old = a.master()
    a.kill(old)
    a.master(other_than=old)
    values = transactions_read_committed(boot, topic, (True,), before=8)
    assert sorted(values) == sorted([f"c{i}".encode() for i in range(8)] * 2)
    return old
