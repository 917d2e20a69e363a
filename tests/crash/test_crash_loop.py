"""The broker is SIGKILLed at random moments while idempotent producers
(acks=all) and a consumer group run against it, then restarted on the same
data dir. Afterwards: every acknowledged message is readable exactly once, in
per-partition order; committed group offsets never moved backwards; and the
consume queues agree with the commitlog (a rebuild gives identical reads)."""

from __future__ import annotations

import itertools
import random
import shutil
import signal
import threading
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test dependency")
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from store import Store, StoreConfig
from tests.kit.gregor import TEST_SEGMENT_BYTES, BrokerProcess
from tests.kit.ports import free_port
from tests.kit.tier import soak
from tests.kit.wait import wait_until

pytestmark = pytest.mark.crash

PARTITIONS = 4
PRODUCERS = 3
KILLS = soak(full=10, push=3)  # per flush mode


class ProducerLoop(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, ident: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.topic, self.number, self.stop_event = topic, ident, stop
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 2, "message.timeout.ms": 120000, "reconnect.backoff.ms": 50,
                                  "reconnect.backoff.max.ms": 500})

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed += 1

    def run(self) -> None:
        seq = 0
        while not self.stop_event.is_set() and seq < 200_000:
            try:
                self.producer.produce(self.topic, key=b"p%d-%d" % (self.number, seq % 16),
                                      value=b"p%d-%08d" % (self.number, seq), on_delivery=self._delivered)
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if seq % 50 else 0.01)
        self.producer.flush(120)


class GroupLoop(threading.Thread):
    """A group member that commits synchronously; records every commit it made."""

    def __init__(self, bootstrap: str, topic: str, group: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.commits: list[dict[int, int]] = []
        self.stop_event = stop
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
        self.consumer.subscribe([topic])

    def run(self) -> None:
        while not self.stop_event.is_set():
            msgs = self.consumer.consume(500, 0.2)
            positions = {m.partition(): m.offset() + 1 for m in msgs if m.error() is None}
            if not positions:
                continue
            try:
                self.consumer.commit(offsets=[TopicPartition(self.consumer.assignment()[0].topic, p, o)
                                              for p, o in positions.items()], asynchronous=False)
                self.commits.append(positions)
            except Exception:
                pass  # a commit during a kill or rebalance may fail; it is simply not recorded
        self.consumer.close()


def _committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in parts if tp.offset >= 0}
    finally:
        consumer.close()


def _read_everything(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 5:
        msgs = consumer.consume(1000, 0.5)
        if msgs:
            idle_since = time.monotonic()
        for m in msgs:
            if m.error() is None:
                out[m.partition()].append((m.offset(), m.value()))
    consumer.close()
    return out


@pytest.mark.parametrize("flush_mode", ["sync", "async"])
def test_sigkill_loop_loses_no_acknowledged_message(tmp_path, flush_mode):
    """In async mode too: a process crash loses nothing, since the page cache survives it."""
    rng = random.Random(20261122)
    broker = BrokerProcess(tmp_path / "data", {"flush.mode": flush_mode, "group.initial.rebalance.delay.ms": "0",
                                               "commitlog.segment.bytes": TEST_SEGMENT_BYTES,
                                               "producer.state.snapshot.interval.ms": "1000"}, port=free_port())
    bootstrap = broker.start()
    topic, group = "crash-loop", "crash-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(20)
    stop = threading.Event()
    producers = [ProducerLoop(bootstrap, topic, i, stop) for i in range(PRODUCERS)]
    member = GroupLoop(bootstrap, topic, group, stop)
    for t in (*producers, member):
        t.start()
    committed_history = []
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.5, 2.5))  # time passing on purpose: a kill at a random moment of the traffic
        broker.stop(sig=signal.SIGKILL)
        broker.start()
        committed_history.append(_committed(bootstrap, topic, group))
    # The last incarnation serves traffic before the loops stop: new acknowledgments and a new commit.
    acked_before, commits_before = sum(len(p.acked) for p in producers), len(member.commits)
    wait_until(lambda: sum(len(p.acked) for p in producers) > acked_before and len(member.commits) > commits_before,
               60, "an acknowledgment and a group commit from the last restarted broker", interval=0.1)
    stop.set()
    for t in (*producers, member):
        t.join(180)
    committed_history.append(_committed(bootstrap, topic, group))
    everything = _read_everything(bootstrap, topic)
    assert broker.stop() == 0
    log = broker.log()

    acked = [a for p in producers for a in p.acked]
    assert len(acked) > 1000, f"too little traffic to mean anything: {len(acked)} acknowledged"
    stored = {(p, off): value for p, records in everything.items() for off, value in records}
    for partition, offset, value in acked:
        assert stored.get((partition, offset)) == value, f"acknowledged {value!r} at {partition}/{offset} lost"
    values = [v for records in everything.values() for _, v in records]
    assert len(values) == len(set(values)), "a message was stored twice"
    for records in everything.values():
        offsets = [o for o, _ in records]
        assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
        for ident in range(PRODUCERS):
            seqs = [int(v.split(b"-")[1]) for _, v in records if v.startswith(b"p%d-" % ident)]
            assert seqs == sorted(seqs), "per-partition order broken"
    for before, after in itertools.pairwise(committed_history):
        for partition, offset in before.items():
            assert after.get(partition, -1) >= offset, f"committed offset moved back on partition {partition}"
    assert log.count("gregor ready") == KILLS + 1

    # The consume queues agree with the commitlog: rebuilding them from it gives identical reads.
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(tmp_path / "data", rebuilt)
    shutil.rmtree(rebuilt / "consumequeue")
    config = StoreConfig(segment_bytes=int(TEST_SEGMENT_BYTES))
    original, copy = Store.open(tmp_path / "data", config), Store.open(rebuilt, config)
    try:
        for p in range(PARTITIONS):
            assert original.high_watermark(topic, p) == copy.high_watermark(topic, p)
            a = b"".join(original.read(topic, p, original.log_start_offset(topic, p), 1 << 30).batches)
            b = b"".join(copy.read(topic, p, copy.log_start_offset(topic, p), 1 << 30).batches)
            assert a == b
    finally:
        original.close()
        copy.close()
    print(f"flush.mode={flush_mode}: kills survived: {KILLS}, acknowledged messages checked: {len(acked)}, stored: {len(values)}")
