"""The Java client (kafka-clients 3.9, Spark's) in a consumer group, with the
range and the cooperative-sticky assignor: three members split 12 partitions;
one leaves; the others take over its partitions with nothing lost or read twice
(the harness commits synchronously after each poll)."""

import time

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from compat_tests.clients import kafka_python
from compat_tests.clients.java import _Member, java_command, require_java
from tests.kit.wait import wait_until

pytestmark = pytest.mark.clients
PARTITIONS = 12


def _member(bootstrap: str, group: str, topic: str, assignor: str) -> _Member:
    return _Member(java_command([
        "consume-group", "--group", group, "--topic", topic, "--bootstrap", bootstrap, "--timeout-ms", "120000",
        "--prop", "session.timeout.ms=10000", "--prop", "heartbeat.interval.ms=500",
        "--prop", f"partition.assignment.strategy=org.apache.kafka.clients.consumer.{assignor}"]))


def _wait(condition, what: str, timeout: float = 60.0) -> None:
    wait_until(condition, timeout, what, interval=0.2)


def _committed(bootstrap: str, group: str, topic: str) -> int:
    offsets = kafka_python.Client(bootstrap).committed(group, topic, range(PARTITIONS))
    return sum(offset for offset in offsets.values() if offset > 0)


def _produce(bootstrap: str, topic: str, prefix: bytes, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(count):
        producer.send(topic, value=b"%s-%d" % (prefix, i), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


@pytest.mark.parametrize("assignor", ["RangeAssignor", "CooperativeStickyAssignor"])
def test_java_members_split_partitions_and_take_over_when_one_leaves(bootstrap, topic_name, assignor):
    require_java()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
    admin.close()
    group = f"java-{assignor}-{topic_name}"
    members = [_member(bootstrap, group, topic_name, assignor) for _ in range(3)]
    try:
        def balanced(ms):
            shares = [m.assignment() or set() for m in ms]
            return all(shares) and sorted(p for s in shares for p in s) == list(range(PARTITIONS))

        _wait(lambda: balanced(members), "three members to share 12 partitions")
        assert sorted(len(m.assignment()) for m in members) == [4, 4, 4]
        _produce(bootstrap, topic_name, b"before", 120)
        _wait(lambda: sum(len(m.records()) for m in members) >= 120, "120 records read")
        # The harness commits after each poll: wait until those commits cover all 120 records, or
        # the leaver's last records would be read again by the member that takes its partitions.
        _wait(lambda: _committed(bootstrap, group, topic_name) == 120, "the reads of all 120 records to be committed")
        leaver, stayers = members[0], members[1:]
        leaver_share = set(leaver.assignment())
        leaver.stop()
        _wait(lambda: balanced(stayers), "the two remaining members to take over")
        assert leaver_share <= set().union(*(m.assignment() for m in stayers))
        _produce(bootstrap, topic_name, b"after", 120)
        _wait(lambda: sum(len(m.records()) for m in members) >= 240, "240 records read")
        # A negative check, time passing on purpose: nothing answers "no duplicate is coming", so a
        # late duplicate gets a second to show up.
        time.sleep(1.0)
        values = [r.value for m in members for r in m.records()]
        assert sorted(values) == sorted([b"before-%d" % i for i in range(120)] + [b"after-%d" % i for i in range(120)])
    finally:
        for m in members:
            m.stop()
