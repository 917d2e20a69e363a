"""Consumer groups side by side, classic protocol against the consumer protocol (KIP-848): Gregor and
Apache Kafka 4.4.0, the same client (confluent-kafka 2.16, `group.protocol=classic` or `consumer`)
with its defaults, and both brokers with theirs (group.initial.rebalance.delay.ms 3 s,
group.consumer.heartbeat.interval.ms 5 s).

  * join to first record: a topic of PARTITIONS partitions holding records; a new group's only
    member subscribes; the time from subscribe() to its first record;
  * hand-over: two members of a group read the topic while a producer writes to every partition
    every 50 ms; one member leaves (close()); the time from the leave to the other member's first
    record of a partition the leaver held.

Every figure is measured --repeat times (fresh brokers each round, the order of the two brokers
alternating); the output gives each broker's median and range and Gregor / Kafka per round.

Run: .venv/bin/python bench/group_bench.py [--repeat 3] [--partitions 100] [--gregor-only] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.figures import side_by_side  # noqa: E402
from tests.kit.gregor import start_broker  # noqa: E402
from tests.kit.kafka import KafkaBroker, KafkaUnavailable  # noqa: E402

KAFKA_4 = "4.4.0"
PROTOCOLS = ("classic", "consumer")


def start(kind: str, tmp: Path):
    if kind == "gregor":
        return start_broker(tmp)
    kafka = KafkaBroker(tmp / "kafka", {}, version=KAFKA_4, heap="1g")
    kafka.start()
    return kafka


def prepare(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for _ in range(10):
            producer.produce(topic, b"x" * 100, partition=p)
    producer.flush(60)


def consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})


def join_ms(bootstrap: str, topic: str, protocol: str, run: int) -> float:
    member = consumer(bootstrap, f"join-{protocol}-{run}", protocol)
    try:
        start_at = time.monotonic()
        member.subscribe([topic])
        deadline = start_at + 60
        while time.monotonic() < deadline:
            message = member.poll(0.01)
            if message is not None and message.error() is None:
                return (time.monotonic() - start_at) * 1000
        raise RuntimeError(f"no record within 60 s ({protocol})")
    finally:
        member.close()


class _Reader(threading.Thread):
    """A member polling on its own thread; notes its assignment (from the rebalance callbacks, run
    by its poll: asking the consumer from another thread while it polls can block) and when it
    first got each partition."""

    def __init__(self, bootstrap: str, group: str, protocol: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.held: set[int] = set()
        self.member = consumer(bootstrap, group, protocol)
        self.member.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        self.first: dict[int, float] = {}  # partition -> when its first record came
        self.watching = False  # from when on `after` notes the first record of each partition
        self.after: dict[int, float] = {}
        self.halt = threading.Event()
        self.start()

    def _assigned(self, _consumer, partitions) -> None:
        self.held = self.held | {tp.partition for tp in partitions}

    def _revoked(self, _consumer, partitions) -> None:
        self.held = self.held - {tp.partition for tp in partitions}

    def run(self) -> None:
        while not self.halt.is_set():
            message = self.member.poll(0.01)
            if message is not None and message.error() is None:
                self.first.setdefault(message.partition(), time.monotonic())
                if self.watching:
                    self.after.setdefault(message.partition(), time.monotonic())
        self.member.close()

    def assignment(self) -> set[int]:
        return set(self.held)


def handover_ms(bootstrap: str, topic: str, partitions: int, protocol: str, run: int) -> float:
    group = f"handover-{protocol}-{run}"
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        while not stop.is_set():
            for p in range(partitions):
                producer.produce(topic, b"y" * 100, partition=p)
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(30)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    stayer = _Reader(bootstrap, group, protocol, topic)
    leaver = _Reader(bootstrap, group, protocol, topic)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # both hold partitions, and have read from each of them
            held_a, held_b = stayer.assignment(), leaver.assignment()
            if held_a and held_b and len(held_a | held_b) == partitions and held_a.isdisjoint(held_b) and \
                    set(stayer.first) >= held_a and set(leaver.first) >= held_b:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"no balanced group within 90 s ({protocol})")
        theirs = leaver.assignment()
        stayer.watching = True
        left_at = time.monotonic()
        leaver.halt.set()
        leaver.join(60)
        deadline = left_at + 60
        while time.monotonic() < deadline:
            taken = [t for p, t in stayer.after.items() if p in theirs]
            if taken:
                return (min(taken) - left_at) * 1000
            time.sleep(0.005)
        raise RuntimeError(f"the leaver's partitions were not read within 60 s ({protocol})")
    finally:
        stop.set()
        stayer.halt.set()
        leaver.halt.set()
        stayer.join(60)
        writer.join(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kinds = ["gregor"] if args.gregor_only else ["gregor", "kafka"]
    results: dict[str, dict[str, list[float]]] = {k: {} for k in kinds}
    for run in range(args.repeat):
        for kind in kinds if run % 2 == 0 else kinds[::-1]:
            tmp = Path(tempfile.mkdtemp(prefix=f"group-bench-{kind}-"))
            try:
                broker = start(kind, tmp)
            except KafkaUnavailable as exc:
                print(f"gregor: Kafka {KAFKA_4} unavailable: {exc}", file=sys.stderr)
                return 1
            try:
                prepare(broker.bootstrap, "groups", args.partitions)
                for protocol in PROTOCOLS:
                    ms = join_ms(broker.bootstrap, "groups", protocol, run)
                    results[kind].setdefault(f"join to first record, {protocol}, ms", []).append(ms)
                    print(f"round {run + 1} {kind}: {protocol} join to first record {ms:,.0f} ms", flush=True)
                for protocol in PROTOCOLS:
                    ms = handover_ms(broker.bootstrap, "groups", args.partitions, protocol, run)
                    results[kind].setdefault(f"hand-over after a leave, {protocol}, ms", []).append(ms)
                    print(f"round {run + 1} {kind}: {protocol} hand-over {ms:,.0f} ms", flush=True)
            finally:
                broker.stop()
                shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("\n".join(side_by_side(results, f"figure ({args.partitions} partitions)", "Kafka 4.4")))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
