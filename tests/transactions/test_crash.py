"""A broker crash in every phase of a transaction (issue 19): after the restart each transaction is
committed or aborted as a whole, never half visible, and the coordinator finishes what it had
prepared. Two ways in: a deterministic one (a transaction left PrepareCommit or PrepareAbort in the
state topic, markers unwritten, as a crash right after the Prepare record leaves it), and a crash
loop (a transactional writer, the broker SIGKILLed at random times, the same transactional id each
round) whose read_committed read-back must be all or nothing per transaction, with every
transaction whose commit returned present and every aborted one absent.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.txn.coordinator import TxnCoordinator
from broker.txn.state import Txn, TxnState
from protocol.record_batch import parse_header
from store import Store
from tests.kit.gregor import ROOT, start_broker
from tests.store.conftest import tiny_config
from tests.kit.tier import soak

SETTINGS = {"group.initial.rebalance.delay.ms": "0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


def _transactional_batch(pid: int, epoch: int, value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=0, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


@pytest.mark.parametrize("commit", [True, False], ids=["prepare-commit", "prepare-abort"])
def test_a_transaction_left_prepared_is_completed_when_the_coordinator_starts(tmp_path, commit):
    store = Store.open(tmp_path, tiny_config())
    try:
        store.create_topic("t", 2, {})
        for p in (0, 1):
            batch = _transactional_batch(7, 3, b"half")
            store.append("t", p, batch, parse_header(batch))
        txn = Txn("tx", 7, 3, 60_000, TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                  {("t", 0), ("t", 1)}, set(), int(time.time() * 1000), int(time.time() * 1000))
        store.write_state([(txn.key(), txn.encode())])
        assert [store.last_stable_offset("t", p) for p in (0, 1)] == [0, 0]

        async def start_coordinator():
            coordinator = TxnCoordinator(store, producers=None, max_timeout_ms=900_000, check_interval_ms=10_000)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(coordinator.run)
                with trio.fail_after(10):
                    while coordinator.describe("tx").state not in (TxnState.COMPLETE_COMMIT,
                                                                   TxnState.COMPLETE_ABORT):
                        await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
            return coordinator.describe("tx").state

        state = trio.run(start_coordinator)
        assert state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        for p in (0, 1):
            assert store.last_stable_offset("t", p) == store.high_watermark("t", p) == 2  # record + marker
            assert store.aborted_transactions("t", p, 0, 2) == ([] if commit else [(7, 0)])
        assert Txn.decode("tx", store.state_value(txn.key())).state is state  # durable
    finally:
        store.close()


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), cached=False)[1] for p in range(partitions)}
    got, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(consumer.position([TopicPartition(topic, p)])[0].offset >= ends[p] for p in range(partitions)
               if ends[p] > 0):
            break
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    consumer.close()
    return got


def test_sigkill_with_a_transaction_open_then_the_producer_commits_it_after_the_restart(tmp_path):
    broker = start_broker(tmp_path, **SETTINGS)
    broker.port = int(broker.bootstrap.rsplit(":", 1)[1])  # the restart binds the same port
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "open-at-crash"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(10):
            producer.produce("t", f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        broker.stop(signal.SIGKILL)
        broker.start()
        assert _read_committed(broker.bootstrap, "t", 2) == []  # still open: held at the LSO
        producer.commit_transaction(60)
        assert sorted(_read_committed(broker.bootstrap, "t", 2)) == sorted(f"v{i}" for i in range(10))
    finally:
        broker.stop()


WRITER = r"""
import json, sys
from confluent_kafka import Producer
bootstrap, run = sys.argv[1], int(sys.argv[2])
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "crash-loop", "transaction.timeout.ms": 60000,
              "message.timeout.ms": 60000})
p.init_transactions(60)
print(json.dumps({"ready": run}), flush=True)
n = 0
while True:
    values = [f"{run}-{n}-{i}" for i in range(6)]
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce("t", v.encode(), partition=i % 3)
    if n % 3 == 2:
        p.flush(60)
        p.abort_transaction(60)
        print(json.dumps({"aborted": f"{run}-{n}"}), flush=True)
    else:
        p.commit_transaction(60)
        print(json.dumps({"committed": f"{run}-{n}"}), flush=True)
    n += 1
"""


def test_a_crash_loop_leaves_every_transaction_whole(tmp_path):
    rng = random.Random(19)
    broker = start_broker(tmp_path, **SETTINGS)
    broker.port = int(broker.bootstrap.rsplit(":", 1)[1])
    committed, aborted, kills = set(), set(), soak(full=12, push=4)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: a dropped client cancels its calls
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(30)
        for run in range(kills):
            writer = subprocess.Popen([sys.executable, "-c", WRITER, broker.bootstrap, str(run)], cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                assert json.loads(writer.stdout.readline()) == {"ready": run}, "the writer never started"
                time.sleep(rng.uniform(0.2, 1.5))
                broker.stop(signal.SIGKILL)
            finally:
                writer.kill()
                out, _ = writer.communicate()
            for line in out.splitlines():
                event = json.loads(line)
                committed.update([event["committed"]] if "committed" in event else [])
                aborted.update([event["aborted"]] if "aborted" in event else [])
            broker.start(timeout=60)
        # the last writer's open transaction is aborted by the next init of the same id
        last = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "crash-loop"})
        last.init_transactions(60)
        seen = _read_committed(broker.bootstrap, "t", 3)
    finally:
        broker.stop()
    by_txn: dict[str, list[str]] = {}
    for value in seen:
        by_txn.setdefault(value.rsplit("-", 1)[0], []).append(value)
    assert len(seen) == len(set(seen)), "a record appears twice"
    partial = {t: vs for t, vs in by_txn.items() if len(vs) != 6}
    assert not partial, f"transactions half visible: {partial}"
    assert committed <= set(by_txn), f"committed transactions lost: {sorted(committed - set(by_txn))}"
    assert not aborted & set(by_txn), f"aborted transactions visible: {sorted(aborted & set(by_txn))}"
    assert len(committed) >= kills, "too few transactions committed for the loop to mean anything"
