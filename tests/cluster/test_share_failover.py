"""A share group (KIP-932) across the failover of its broker group's master: the share-partition's
state is a record of the replicated commitlog, written and held by the sync-state set before an
acknowledgement is answered, so the new master delivers again exactly what was acquired and not
acknowledged, and never what was."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from tests.cluster.load import create_topic

pytestmark = [pytest.mark.crash, pytest.mark.clients]


def _poll(member: ShareConsumer, seconds: float = 1.0) -> list:
    messages = [m for m in member.poll(seconds) or [] if m.error() is None]
    return messages


def test_a_share_group_survives_the_sigkill_of_its_master(broker_group):
    group = broker_group(3)
    create_topic(group, "tasks", partitions=1)
    member = ShareConsumer({"bootstrap.servers": group.bootstrap, "group.id": "workers",
                            "share.acknowledgement.mode": "explicit"})
    member.subscribe(["tasks"])
    producer = Producer({"bootstrap.servers": group.bootstrap, "acks": "all"})
    accepted, held = set(), set()
    try:
        deadline = time.monotonic() + 60
        sent = False
        while time.monotonic() < deadline and len(accepted) + len(held) < 20:
            messages = _poll(member, 0.5)
            if not sent:  # once the member is in (a new share group starts at the end: Kafka's default)
                for i in range(20):
                    producer.produce("tasks", str(i).encode())
                assert producer.flush(30) == 0
                sent = True
            for m in messages:
                value = int(m.value())
                if value % 2 == 0:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(value)
                else:
                    held.add(value)  # acquired, never acknowledged
            member.commit_sync()
        assert (len(accepted), len(held)) == (10, 10)
        old = group.master()
        group.kill(old)
        group.master(timeout=30, other_than=old)
    finally:
        member.close()
    after = ShareConsumer({"bootstrap.servers": group.bootstrap, "group.id": "workers"})
    after.subscribe(["tasks"])
    again = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(again) < 10:
            again += [int(m.value()) for m in _poll(after)]
        end = time.monotonic() + 3
        while time.monotonic() < end:
            again += [int(m.value()) for m in _poll(after, 0.5)]
    finally:
        after.close()
    assert sorted(again) == sorted(held)  # nothing acknowledged came back, nothing held was lost
