"""A rolling upgrade between the group protocols (KIP-848's online migration; Kafka 4's default
policy, `bidirectional`): while the client's member consumes, a member of the other protocol joins
its group — a consumer-protocol member (confluent-kafka 2.16, group.protocol=consumer) beside each
client's classic member, a classic member (confluent-kafka) beside the Java client 4.4's
consumer-protocol member. The two share the partitions and every record is read; when the joiner
leaves, the client's member holds every partition again and reads on. Against Gregor and Kafka
4.4.0 (Kafka 3.9 has no online migration)."""

from __future__ import annotations

import time

import pytest

from compat_tests.clients import Message, confluent
from compat_tests.conftest import GREGOR, KAFKA_4, KAFKA_4_VERSION
from compat_tests.test_groups import PARTITIONS, _wait_for_balance

BROKERS = (GREGOR, KAFKA_4)
pytestmark = [pytest.mark.kafka_version(KAFKA_4_VERSION)]


def _read_all(members, values: set[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not values <= {r.value for m in members for r in m.records()}:
        assert time.monotonic() < deadline, "records never read"
        time.sleep(0.2)


def _batch(tag: str) -> list[Message]:
    return [Message(b"%s%d" % (tag.encode(), i), partition=i % PARTITIONS) for i in range(60)]


def test_a_member_of_the_other_protocol_joins_the_group_and_leaves_it(client, new_topic, reference, name, bootstrap):
    topic = new_topic(PARTITIONS)
    joiner_protocol = "classic" if client.name == "java-4.4" else "consumer"  # java-4.4's members: the consumer protocol
    own = client.start_member(name, topic)
    joiner = None
    try:
        _wait_for_balance([own])
        reference.produce(topic, first := _batch("before"))
        _read_all([own], {m.value for m in first})
        joiner = confluent.Client(bootstrap).start_member(name, topic, protocol=joiner_protocol)
        shares = _wait_for_balance([own, joiner])
        reference.produce(topic, second := _batch("during"))
        _read_all([own, joiner], {m.value for m in second})
        assert {r.partition for r in joiner.records() if r.value.startswith(b"during")} <= shares[1]
        joiner.stop()
        joiner = None
        _wait_for_balance([own])  # every partition back with the client's member
        reference.produce(topic, third := _batch("after"))
        _read_all([own], {m.value for m in third})
    finally:
        for member in (own, joiner):
            if member is not None:
                member.stop()
