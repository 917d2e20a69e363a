"""Share groups (KIP-932, queues): members of one group read one partition cooperatively, each record
acquired under a lock and acknowledged one by one. Against Gregor and Kafka 4.4.0 (Kafka 3.9 has no
share groups), with the clients that have a share consumer: confluent-kafka 2.16's ShareConsumer and
the Java client 4.4's KafkaShareConsumer. Both brokers run with a 2 s lock and a delivery limit of 3
(conftest.SHARE_SETTINGS)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from compat_tests.clients import Message
from compat_tests.conftest import GREGOR, KAFKA_4, KAFKA_4_VERSION

BROKERS = (GREGOR, KAFKA_4)
# On 3-node clusters in the full tier only: per push, a broker group's share groups are covered by
# tests/cluster/test_share_failover.py, and these scenarios take 80 s of the group's matrix
CLUSTERS_IN_FULL_TIER_ONLY = True
pytestmark = [pytest.mark.kafka_version(KAFKA_4_VERSION)]


def _from_earliest(bootstrap: str, group: str, **configs: str) -> None:
    """The group reads from the earliest record (share.auto.offset.reset, a group config set with
    IncrementalAlterConfigs on the GROUP resource; kafka-python's admin has no GROUP resource)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = {"share.auto.offset.reset": "earliest", **configs}
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _values(n: int) -> list[Message]:
    return [Message(str(i).encode()) for i in range(n)]


def _until(done, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.2)


def test_three_members_share_one_partition_each_record_once(client, new_topic, reference, name, bootstrap):
    topic = new_topic(1)
    # a lock longer than the brokers' 2 s, so a slow poll loop on a loaded machine does not outlast it
    _from_earliest(bootstrap, name, **{"share.record.lock.duration.ms": "15000"})
    members = [client.share_member(name, topic, timeout=90) for _ in range(3)]
    try:
        for chunk in range(30):  # a few records at a time while every member polls: a member's fetch
            # acquires what is there, so 300 records at once could all go to the first member asking
            reference.produce(topic, [Message(str(chunk * 10 + i).encode()) for i in range(10)])
            time.sleep(0.3)
        _until(lambda: sum(len(m.deliveries()) for m in members) >= 300, 60)
        time.sleep(1)  # anything delivered twice shows now
    finally:
        for member in members:
            member.stop()
    got = [sorted(int(d.value) for d in m.deliveries()) for m in members]
    assert sorted(v for vs in got for v in vs) == list(range(300))  # each record to one member, once
    assert sum(1 for vs in got if vs) >= 2, [len(vs) for vs in got]


def test_released_records_come_back_counted_and_rejected_ones_never(client, new_topic, reference, name, bootstrap):
    topic = new_topic(1)
    _from_earliest(bootstrap, name)
    reference.produce(topic, _values(10))
    member = client.share_member(name, topic, explicit=True, release=(b"3",), reject=(b"5",), count=11, linger=3)
    member.wait(60)
    member.stop()
    seen = [(int(d.value), d.delivery_count) for d in member.deliveries()]
    counts = Counter(v for v, _ in seen)
    assert (3, 1) in seen and (3, 2) in seen and counts[3] == 2
    assert all(counts[v] == 1 for v in range(10) if v != 3), seen  # 5 rejected: never again


def test_a_renewed_lock_outlasts_its_duration(client, new_topic, reference, name, bootstrap):
    topic = new_topic(1)
    _from_earliest(bootstrap, name)
    reference.produce(topic, _values(3))
    # record 2, the last one polled, is renewed twice, 1.4 s apart, then accepted: held 2.8 s under a
    # 2 s lock (the last: the others are acknowledged before the waits, not held through them)
    holder = client.share_member(name, topic, explicit=True, renew=(b"2",), count=3, linger=2, timeout=40)
    try:
        _until(lambda: len(holder.deliveries()) >= 1, 30)
        other = client.share_member(name, topic, explicit=True, timeout=40)  # would get 2 if its lock ran out
        holder.wait(40)
        other.stop()
    finally:
        holder.stop()
    assert sorted((int(d.value), d.delivery_count) for d in holder.deliveries()) == [(0, 1), (1, 1), (2, 1)]
    assert other.deliveries() == []


def test_an_expired_lock_sends_the_records_to_another_member(client, new_topic, reference, name, bootstrap):
    topic = new_topic(1)
    # a lock of 5 s, not the brokers' 2: the second member lingers a second before it acknowledges
    _from_earliest(bootstrap, name, **{"share.record.lock.duration.ms": "5000"})
    reference.produce(topic, _values(5))
    slow = client.share_member(name, topic, hold=True, timeout=40)  # acquires, never acknowledges
    try:
        _until(lambda: len(slow.deliveries()) >= 5, 30)
        fast = client.share_member(name, topic, explicit=True, count=5, linger=1, timeout=40)
        fast.wait(40)
        fast.stop()
    finally:
        slow.stop()
    assert sorted(int(d.value) for d in slow.deliveries()) == list(range(5))
    # each record once, on a later delivery than the first: 2, or 3 when the held member's client won
    # the expired records first. The Java share consumer keeps fetching in the background after an
    # empty answer (ShareConsumeRequestManager's fetchMoreRecords), so a member whose application
    # stopped polling can acquire them again into its buffer, never to hand them out, and they wait
    # out a second lock. The race is the client's: a broker, Kafka's too, serves whichever fetch
    # comes first.
    assert sorted(int(d.value) for d in fast.deliveries()) == list(range(5))
    assert {d.delivery_count for d in fast.deliveries()} <= {2, 3}


def test_a_record_released_up_to_the_delivery_limit_is_archived(client, new_topic, reference, name, bootstrap):
    topic = new_topic(1)
    _from_earliest(bootstrap, name)
    reference.produce(topic, _values(1))
    member = client.share_member(name, topic, explicit=True, release_always=(b"0",), count=3, linger=3)
    member.wait(60)
    member.stop()
    assert [d.delivery_count for d in member.deliveries()] == [1, 2, 3]  # the limit is 3: then archived
