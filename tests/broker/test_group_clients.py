"""Consumer groups end to end with kafka-python against a live broker.

Clustering consumption (members of one group share the partitions) and
broadcast consumption (separate groups each read everything), with synchronous
commits, a member leaving mid-stream, and a broker killed with SIGKILL.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.kit.wait import wait_until

pytestmark = pytest.mark.clients

PARTITIONS = 12
SETTINGS = {"group.initial.rebalance.delay.ms": "300", "commitlog.segment.bytes": str(8 << 20)}


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, first: int, count: int, partitions: int = PARTITIONS) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(first, first + count):
            producer.send(topic, value=f"m{i}".encode(), partition=i % partitions)
        producer.flush()
    finally:
        producer.close()


def consumer(bootstrap: str, group: str, topic: str | None = None, client_id: str = "gregor-test",
             **extra) -> KafkaConsumer:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                      auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                      heartbeat_interval_ms=500, max_poll_interval_ms=10000, fetch_max_wait_ms=100, **extra)
    if topic is not None:
        c.subscribe([topic])
    return c


class Member(threading.Thread):
    """One group member: poll, record, commit synchronously, repeat until told to stop.

    Each poll may wait POLL_MS, long enough for a whole rebalance to complete inside one poll (it
    returns early once records arrive). kafka-python 3.0.12 drops a JoinGroup/SyncGroup that finishes
    after its poll() timed out and joins again (coordinator/base.py, join_group_async replaces a
    finished _join_task instead of reading it); with short polls on a loaded machine the leader then
    rejoins after every generation and the group never settles.
    """

    POLL_MS = 3000

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, seen: list,
                 listener=None, **extra) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = consumer(bootstrap, group, client_id=name, **extra)
        self.consumer.subscribe([topic], listener=listener)
        self.seen = seen
        self.stop_event = threading.Event()
        self.assigned: set[int] = set()
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                batches = self.consumer.poll(timeout_ms=self.POLL_MS)
                for records in batches.values():
                    self.seen.extend((self.name, r.partition, r.offset, r.value) for r in records)
                if batches:
                    self.consumer.commit()
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
            self.consumer.close()  # leaves the group (a static member stays in it)
        except Exception as exc:  # noqa: BLE001 - reported by the test thread
            self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.join(self.POLL_MS / 1000 + 15)
        assert not self.is_alive() and self.error is None, f"{self.name} did not stop cleanly: {self.error!r}"


def wait_for(condition, timeout: float, what: str, members: list[Member] = ()) -> None:
    """The kit's wait_until, failing at once with a member's own error when one of `members` fails."""
    def met():
        for m in members:
            if m.error is not None:
                raise AssertionError(f"{m.name} failed") from m.error
        return condition()
    wait_until(met, timeout, what)


def test_three_members_split_partitions_and_take_over_when_one_leaves(fresh_broker, topic_name):
    bootstrap = fresh_broker(**SETTINGS).bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, 0, 600)
    seen: list = []
    members = [Member(bootstrap, "clustering", topic_name, f"member-{i}", seen) for i in range(3)]
    for m in members:
        m.start()
    try:
        def split_three_ways() -> bool:
            parts = [m.assigned for m in members]
            return all(parts) and sum(map(len, parts)) == PARTITIONS and set().union(*parts) == set(range(PARTITIONS))

        wait_for(lambda: split_three_ways() and len(seen) >= 600, 60, "three-way split", members)
        leaving = members.pop()
        leaving.stop_event.set()
        leaving.join(15)
        assert leaving.error is None
        produce(bootstrap, topic_name, 600, 600)

        def two_take_over() -> bool:
            parts = [m.assigned for m in members]
            return all(parts) and set().union(*parts) == set(range(PARTITIONS)) and sum(map(len, parts)) == PARTITIONS

        wait_for(lambda: two_take_over() and len(seen) >= 1200, 60, "takeover by the two others", members)
        # A negative check, time passing on purpose: nothing answers "no duplicate is coming", so a
        # late duplicate gets half a second to show up.
        time.sleep(0.5)
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(15)
    values = Counter(value for _, _, _, value in seen)
    assert set(values) == {f"m{i}".encode() for i in range(1200)}, "messages lost"
    assert [v for v, n in values.items() if n > 1] == [], "messages read twice"
    assert {name for name, *_ in seen} == {"member-0", "member-1", "member-2"}


def read_all(bootstrap: str, group: str, topic: str, expected: int) -> list[bytes]:
    c = consumer(bootstrap, group, topic)
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            c.commit()
    finally:
        c.close()
    return got


def test_two_groups_on_one_topic_each_read_everything(fresh_broker, topic_name):
    bootstrap = fresh_broker(**SETTINGS).bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, 0, 240)
    everything = sorted(f"m{i}".encode() for i in range(240))
    assert sorted(read_all(bootstrap, "broadcast-a", topic_name, 240)) == everything
    assert sorted(read_all(bootstrap, "broadcast-b", topic_name, 240)) == everything


@pytest.mark.crash
def test_group_resumes_from_last_commit_after_broker_sigkill(fresh_broker, topic_name):
    broker = fresh_broker(**SETTINGS)
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 0, 100, partitions=2)
    c = consumer(broker.bootstrap, "survivor")
    c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
    c.seek_to_beginning()
    got = 0
    while got < 20:
        for records in c.poll(timeout_ms=200).values():
            got += len(records)
    committed = {tp: c.position(tp) for tp in c.assignment()}
    c.commit()  # the simple-commit path: assign() users commit with generation -1
    c.close(autocommit=False)
    broker.stop(signal.SIGKILL)
    broker.log_path.write_text("")  # so that start() reads the new port, not the old one
    broker.start()
    after = consumer(broker.bootstrap, "survivor")
    try:
        for tp, offset in committed.items():
            assert after.committed(tp) == offset
    finally:
        after.close()


class LibrdkafkaMember:
    """A confluent-kafka member; every member is polled from the test thread (librdkafka runs the
    group protocol in its own threads). Each message is committed synchronously. A commit that
    races a rebalance fails with ILLEGAL_GENERATION (as on Kafka: librdkafka pipelines it behind
    its JoinGroup); it is retried, at the latest on revocation, before the partition can move."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, assignor: str, seen: list) -> None:
        from confluent_kafka import Consumer

        self.name, self.seen = name, seen
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "partition.assignment.strategy": assignor, "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500, "max.poll.interval.ms": 10000,
                                  "fetch.wait.max.ms": 100})
        self.assigned: set[int] = set()
        self.unacknowledged: dict[int, object] = {}  # partition -> last message whose commit failed
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, consumer, partitions) -> None:
        self.assigned |= {p.partition for p in partitions}

    def _revoked(self, consumer, partitions) -> None:
        self._retry_commits()
        self.assigned -= {p.partition for p in partitions}

    def _commit(self, msg) -> bool:
        from confluent_kafka import KafkaError, KafkaException

        try:
            self.consumer.commit(message=msg, asynchronous=False)
            return True
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS):
                raise
            return False

    def _retry_commits(self) -> None:
        for partition, msg in list(self.unacknowledged.items()):
            if self._commit(msg):
                del self.unacknowledged[partition]

    def poll(self) -> None:
        self._retry_commits()
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.seen.append((self.name, msg.partition(), msg.offset(), msg.value()))
            if not self._commit(msg):
                self.unacknowledged[msg.partition()] = msg


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_librdkafka_members_split_partitions_and_take_over_when_one_leaves(fresh_broker, topic_name, assignor):
    pytest.importorskip("confluent_kafka")
    bootstrap = fresh_broker(**SETTINGS).bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, 0, 600)
    seen: list = []
    members = [LibrdkafkaMember(bootstrap, f"clustering-{assignor}", topic_name, f"member-{i}", assignor, seen)
               for i in range(3)]

    def poll_until(condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            for m in members:
                m.poll()

    def covered(n: int) -> bool:
        parts = [m.assigned for m in members]
        return (len(parts) == n and all(parts) and sum(map(len, parts)) == PARTITIONS
                and set().union(*parts) == set(range(PARTITIONS)))

    try:
        poll_until(lambda: covered(3) and len(seen) >= 600, 60, "three-way split")
        members.pop().consumer.close()  # commits nothing new, leaves the group
        produce(bootstrap, topic_name, 600, 600)
        poll_until(lambda: covered(2) and len(seen) >= 1200, 60, "takeover by the two others")
        end = time.monotonic() + 0.5  # a late duplicate would show up here
        poll_until(lambda: time.monotonic() > end, 5, "quiet")
    finally:
        for m in members:
            m.consumer.close()
    values = Counter(value for _, _, _, value in seen)
    assert set(values) == {f"m{i}".encode() for i in range(1200)}, "messages lost"
    assert [v for v, n in values.items() if n > 1] == [], "messages read twice"


def test_static_member_restarting_within_its_session_gets_its_partitions_back_without_rebalance(
        fresh_broker, topic_name):
    from kafka import ConsumerRebalanceListener

    class Revocations(ConsumerRebalanceListener):
        count = 0

        def on_partitions_revoked(self, revoked):
            if revoked:
                Revocations.count += 1

        def on_partitions_assigned(self, assigned):
            pass

    bootstrap = fresh_broker(**SETTINGS).bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, 0, PARTITIONS)  # records end each member's first poll after it joins
    seen: list = []

    def static(instance: str, listener=None) -> Member:
        member = Member(bootstrap, "static", topic_name, instance, seen, listener, group_instance_id=instance)
        member.start()
        return member

    a, b = static("host-a"), static("host-b", Revocations())
    members = [a, b]
    try:
        wait_for(lambda: a.assigned and b.assigned and len(a.assigned | b.assigned) == PARTITIONS
                 and not a.assigned & b.assigned, 30, "a two-way split", members)
        before_a, before_b, revoked = set(a.assigned), set(b.assigned), Revocations.count
        members.remove(a)
        a.stop()  # a static member does not leave the group on close
        again = static("host-a")
        members.append(again)
        wait_for(lambda: again.assigned, 30, "the restarted member's assignment", members)
        assert again.assigned == before_a
        assert b.assigned == before_b and Revocations.count == revoked
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(Member.POLL_MS / 1000 + 15)
