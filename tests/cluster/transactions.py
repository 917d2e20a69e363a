"""A transactional round trip read back with read_committed, run on any broker group."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer


def transactions_read_committed(boot: str, topic: str, outcomes: tuple[bool, ...], before: int = 0) -> list[bytes]:
    """One transaction per outcome (True: commit) of 8 records over partitions 0-3 of `topic`
    (c0..c7 committed, a0..a7 aborted), then what a read_committed consumer reads from the start:
    until the records of every committed transaction came (and `before` committed earlier), or
    40 s, and 2 s more for any extra."""
    producer = Producer({"bootstrap.servers": boot, "transactional.id": f"t-{uuid.uuid4().hex[:6]}",
                         "transaction.timeout.ms": 30000})
    producer.init_transactions(30)
    for commit in outcomes:
        producer.begin_transaction()
        for i in range(8):
            producer.produce(topic, value=f"{'c' if commit else 'a'}{i}".encode(), partition=i % 4)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    consumer = Consumer({"bootstrap.servers": boot, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values, wanted = [], 8 * sum(outcomes) + before
    deadline = time.monotonic() + 40
    try:
        while time.monotonic() < deadline and len(values) < wanted:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        # A negative check, time passing on purpose: nothing answers "no extra record is coming" (an
        # aborted or duplicated one), so it gets 2 s to show up.
        time.sleep(2)
        while (msg := consumer.poll(0.5)) is not None:
            if not msg.error():
                values.append(msg.value())
    finally:
        consumer.close()
    return values
