"""Share groups (KIP-932) side by side: Gregor and Apache Kafka 4.4.0, the same clients
(confluent-kafka 2.16's ShareConsumer) and settings.

  * throughput: a 1-partition topic holding RECORDS records of 1 KiB, read by a share group of
    1, 2 and 4 members (each its own process), every record acknowledged explicitly (ACCEPT) and
    committed once per poll; records/s from the members' start to the last record acknowledged;
  * redelivery: a member acquires a record and goes silent; another member polls; the time from
    the lock's expiry (acquisition + group.share.record.lock.duration.ms, 1 s here) to the record
    reaching the other member;
  * Gregor's memory for 1,000,000 in-flight records of one share-partition (tracemalloc).

Every figure is measured --repeat times (fresh brokers each round, the order of the two brokers
alternating); the output gives each broker's median and range and Gregor / Kafka per round.

Run: .venv/bin/python bench/share_bench.py [--repeat 3] [--records 20000] [--gregor-only] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from broker.groups.share_partition import SharePartition  # noqa: E402
from bench.figures import side_by_side  # noqa: E402
from tests.kit.gregor import start_broker  # noqa: E402
from tests.kit.kafka import KafkaBroker, KafkaUnavailable  # noqa: E402

KAFKA_4 = "4.4.0"
LOCK_MS = 1000
SETTINGS = {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS)}
MEMBERS = (1, 2, 4)


def start(kind: str, tmp: Path):
    if kind == "gregor":
        return start_broker(tmp, **SETTINGS)
    kafka = KafkaBroker(tmp / "kafka", dict(SETTINGS), version=KAFKA_4, heap="1g")
    kafka.start()
    return kafka


def prepare(bootstrap: str, topic: str, group: str, records: int, value_size: int = 1024) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000})
    value = b"x" * value_size
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def member(bootstrap: str, group: str, topic: str, go, counts, index: int, stop) -> None:
    """One member: read and ACCEPT every record, commit once per poll, until told to stop."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    go.wait()
    done = 0
    while not stop.is_set():
        messages = consumer.poll(0.2) or []
        for m in messages:
            if m.error() is None:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                done += 1
        if messages:
            consumer.commit_sync()
            counts[index] = done
    consumer.close()


def throughput(bootstrap: str, members: int, records: int, run: int) -> float:
    topic, group = f"share-bench-{members}-{run}", f"share-bench-{members}-{run}"
    prepare(bootstrap, topic, group, records)
    ctx = mp.get_context("spawn")
    go, stop = ctx.Event(), ctx.Event()
    counts = ctx.Array("q", members)
    procs = [ctx.Process(target=member, args=(bootstrap, group, topic, go, counts, i, stop)) for i in range(members)]
    for p in procs:
        p.start()
    time.sleep(2)  # the members subscribe (and, on Kafka, the share-partition initializes) before the clock starts
    started = time.perf_counter()
    go.set()
    deadline = started + 300
    while sum(counts) < records and time.perf_counter() < deadline:
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    read = sum(counts)
    stop.set()
    for p in procs:
        p.join(60)
    if read < records:
        raise RuntimeError(f"{members} member(s) acknowledged {read} of {records} records in 300 s")
    return records / elapsed


def redelivery_ms(bootstrap: str, run: int) -> float:
    """From the lock's expiry to another member holding the record, in ms."""
    topic, group = f"share-redeliver-{run}", f"share-redeliver-{run}"
    prepare(bootstrap, topic, group, 1, 16)
    silent = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    silent.subscribe([topic])
    acquired = None
    deadline = time.monotonic() + 60
    while acquired is None and time.monotonic() < deadline:
        if silent.poll(0.2):
            acquired = time.perf_counter()
    if acquired is None:
        raise RuntimeError("the first member got nothing in 60 s")
    other = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    other.subscribe([topic])
    got = None
    deadline = time.monotonic() + 60
    while got is None and time.monotonic() < deadline:
        messages = other.poll(0.05) or []
        if messages:
            got = time.perf_counter()
            other.acknowledge(messages[0], AcknowledgeType.ACCEPT)
            other.commit_sync()
    other.close()
    silent.close()
    if got is None:
        raise RuntimeError("the record was not redelivered in 60 s")
    return (got - acquired) * 1000 - LOCK_MS


def in_flight_bytes(records: int = 1_000_000, per_fetch: int = 500) -> tuple[int, int]:
    """Memory a share-partition holds for `records` in-flight records acquired `per_fetch` at a time
    by 100 members: (held after, tracemalloc's peak during the acquisitions). Gregor only: Kafka's
    is inside its JVM."""
    tracemalloc.start()
    part = SharePartition(0, max_in_flight=records)
    for i in range(records // per_fetch):
        part.acquire(0, f"member-{i % 100}", per_fetch, records)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert part.in_flight() == records
    return held, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kinds = ["gregor"] if args.gregor_only else ["gregor", "kafka"]
    results: dict[str, dict[str, list[float]]] = {k: {} for k in kinds}
    for run in range(args.repeat):
        for kind in kinds if run % 2 == 0 else kinds[::-1]:
            tmp = Path(tempfile.mkdtemp(prefix=f"share-bench-{kind}-"))
            try:
                broker = start(kind, tmp)
            except KafkaUnavailable as exc:
                print(f"gregor: Kafka {KAFKA_4} unavailable: {exc}", file=sys.stderr)
                return 1
            try:
                for n in MEMBERS:
                    rate = throughput(broker.bootstrap, n, args.records, run)
                    results[kind].setdefault(f"records/s, {n} member(s)", []).append(rate)
                    print(f"round {run + 1} {kind}: {n} member(s) {rate:,.0f} records/s", flush=True)
                ms = redelivery_ms(broker.bootstrap, run)
                results[kind].setdefault("lock expiry to redelivery, ms", []).append(ms)
                print(f"round {run + 1} {kind}: redelivery {ms:,.0f} ms after the lock's expiry", flush=True)
            finally:
                broker.stop()
                shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("\n".join(side_by_side(results, "figure", "Kafka 4.4")))
    held, peak = in_flight_bytes()
    print(f"\nGregor: 1,000,000 in-flight records of one share-partition hold {held / 1e6:.1f} MB "
          f"(peak while acquiring {peak / 1e6:.1f} MB; state and delivery count: 1 byte per record, "
          "acquisitions: one entry per fetch)")
    if args.json:
        args.json.write_text(json.dumps({**results, "in_flight_bytes_1m": held, "in_flight_peak_1m": peak},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
