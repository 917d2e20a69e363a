"""More than one core: one Gregor node, two Gregor broker groups on the same machine, and one Kafka
node, under the same produce load (issue 57; docs/benchmarks.md, *Using more than one core*).

A Gregor node is one Python process whose event loop does the protocol work, so it uses about
one core; a machine's other cores are used by running more nodes on it, each the master of a
broker group of its own (one ZooKeeper, distinct `broker.group` names; docs/replication.md,
*Several broker groups*): a topic's partitions are placed round-robin over the groups, and
clients spread their requests over the masters. Kafka is one JVM whose thread pools use every
core.

Systems: `gregor-1` (a single node, no ZooKeeper), `gregor-2` (two broker groups of one node
each: the partitions split between them), `kafka` (Apache Kafka 3.9.0, one node, KRaft).
Workloads: 1 KiB records, acks=1, async flush, to every partition of one topic in turn: from
CLIENTS producer processes (bench/loadgen.py, librdkafka) at 8 and 1,000 partitions, and from one
bench/direct_producer.py at 1,000 partitions (prebuilt requests, one record per partition's
batch: a client that costs little, so the brokers' per-partition work is what fills the cores;
Gregor only: Kafka answered its first requests NOT_LEADER_OR_FOLLOWER for seconds after creating
the partitions, which the direct producer counts as failed).
Per case: the aggregate records/s (all producers' records over the span from the first start to
the last end) and the brokers' CPU seconds per GB. Each round starts every system afresh, in an
order that alternates between rounds; figures are median [lowest-highest] over the rounds.

Run: .venv/bin/python bench/cores_bench.py [--repeat 3] [--records 600000] [--gregor-only]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import ROOT, stat_cpu_seconds
from figures import spread

if str(ROOT) not in sys.path:  # tests.kit starts the brokers and ZooKeeper
    sys.path.insert(0, str(ROOT))

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
DIRECT_PRODUCER = Path(__file__).resolve().parent / "direct_producer.py"
CLIENTS = 2  # librdkafka producer processes per case
VALUE = 1024
# (partitions, client): librdkafka's producers, or one bench/direct_producer.py (prebuilt requests:
# a client that costs little, so that the brokers, not the clients, are what the cores run)
WORKLOADS = ((8, "librdkafka"), (1000, "librdkafka"), (1000, "direct"))
SEGMENT = str(1 << 30)


@dataclass
class System:
    name: str
    bootstrap: str
    pids: list[int]

    def cpu(self) -> float:
        return sum(stat_cpu_seconds(Path(f"/proc/{pid}/stat")) for pid in self.pids)


@contextmanager
def gregor(tmp: Path, groups: int, zk_connect: str | None) -> Iterator[System]:
    from tests.kit.gregor import BrokerProcess
    from tests.kit.group import BrokerGroup
    data = tmp / f"gregor-{groups}-{uuid.uuid4().hex[:6]}"
    data.mkdir(parents=True)
    settings = {"commitlog.segment.bytes": SEGMENT, "group.initial.rebalance.delay.ms": "0"}
    nodes: list = []
    try:
        if groups == 1:
            node = BrokerProcess(data / "node", settings)
            node.start(timeout=120)
            nodes.append(node)
        else:
            connect = f"{zk_connect}/cores-{uuid.uuid4().hex[:12]}"
            for i in range(groups):
                group = BrokerGroup(data, connect, 1, f"g{i}", settings, first_id=i + 1)
                group.start()
                nodes.extend(group.nodes.values())
        yield System(f"gregor-{groups}", ",".join(n.bootstrap for n in nodes), [n.proc.pid for n in nodes])
    finally:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()  # its data is deleted next
                node.proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


@contextmanager
def kafka(tmp: Path) -> Iterator[System]:
    from tests.kit.kafka import KafkaBroker
    data = tmp / f"kafka-{uuid.uuid4().hex[:6]}"
    broker = KafkaBroker(data, {})
    try:
        broker.start(timeout=180)
        yield System("kafka", broker.bootstrap, [broker.proc.pid])
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.proc.kill()
            broker.proc.wait(30)
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=120)[name].result()
    deadline = time.monotonic() + 120
    while True:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
                p.leader >= 0 for p in topic.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: no leader for every partition after 120 s")
        time.sleep(0.1)


def produce(system: System, topic: str, partitions: int, records: int, client: str) -> dict:
    """CLIENTS librdkafka producers at once, each `records` // CLIENTS records, or one direct
    producer of `records` records (batches of one record per partition); aggregate records/s and
    the brokers' CPU s/GB."""
    if client == "direct":
        spec = {"bootstrap": system.bootstrap, "topics": [topic], "partitions_per_topic": partitions, "size": VALUE,
                "batch_records": 1, "acks": "1", "seconds": 120, "max_bytes": records * VALUE}
        argv = [[sys.executable, str(DIRECT_PRODUCER), json.dumps(spec)]]
    else:
        spec = {"mode": "produce", "bootstrap": system.bootstrap, "topics": [topic], "partitions_per_topic": partitions,
                "size": VALUE, "acks": "1", "seconds": 120, "max_messages": records // CLIENTS, "max_seconds": 240}
        argv = [[sys.executable, str(LOADGEN), json.dumps(spec)]] * CLIENTS
    cpu = system.cpu()
    started = time.monotonic()
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in argv]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        if proc.returncode != 0:
            raise RuntimeError(f"loadgen exited {proc.returncode}: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    span = time.monotonic() - started
    delivered = sum(r["delivered"] for r in results)
    # the direct producer stops at its byte budget a whole request at a time: up to 10% short
    if delivered < (records * 0.9 if client == "direct" else records - len(procs)) or any(r["failed"] for r in results):
        raise RuntimeError(f"{system.name}: {delivered} of {records} records delivered: {results}")
    # span counts the clients' start (a second or so); their own rates are over their sending only
    rate = sum(r["msgs_per_s"] for r in results)
    return {"records_per_s": rate, "span_s": span,
            "cpu_s_per_gb": (system.cpu() - cpu) / (delivered * VALUE / 1e9)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=600_000, help="records per case, all producers together")
    parser.add_argument("--gregor-only", action="store_true")
    args = parser.parse_args()
    from tests.kit.zookeeper import ZooKeeperProcess
    tmp = Path(tempfile.mkdtemp(prefix="cores-bench-"))
    zk = ZooKeeperProcess(tmp / "zookeeper")
    (tmp / "zookeeper").mkdir()
    zk.start()
    systems = ["gregor-1", "gregor-2"] + ([] if args.gregor_only else ["kafka"])
    figures: dict[tuple[str, int, str], list[dict]] = {}
    started = time.time()
    try:
        for round_ in range(args.repeat):
            order = systems if round_ % 2 == 0 else list(reversed(systems))
            for partitions, client in WORKLOADS:
                for name in order:
                    if name == "kafka" and client == "direct":
                        continue  # Kafka refused its first requests (NOT_LEADER, for seconds after creation)
                    context = kafka(tmp) if name == "kafka" else gregor(tmp, int(name[-1]), zk.connect)
                    with context as system:
                        topic = f"cores-{partitions}"
                        create_topic(system.bootstrap, topic, partitions)
                        figure = produce(system, topic, partitions, args.records, client)
                    figures.setdefault((name, partitions, client), []).append(figure)
                    print(f"round {round_ + 1}, {partitions} partitions, {client}, {name}: "
                          f"{figure['records_per_s']:,.0f} records/s, {figure['cpu_s_per_gb']:.2f} CPU s/GB", flush=True)
    finally:
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    minutes = (time.time() - started) / 60
    print(f"\n{args.repeat} rounds, {args.records:,} records of {VALUE} B per case (librdkafka: {CLIENTS} producer "
          f"processes; direct: one), acks=1; {platform.machine()}, 2 CPUs shared by brokers and clients; "
          f"{minutes:.1f} min")
    print("| partitions, client | system | records/s | / gregor-1 per round | / kafka per round | brokers' CPU s/GB |")
    print("|---|---|---:|---:|---:|---:|")
    for partitions, client in WORKLOADS:
        base = [f["records_per_s"] for f in figures[("gregor-1", partitions, client)]]
        kafka_rates = [f["records_per_s"] for f in figures.get(("kafka", partitions, client), [])]
        for name in systems:
            if (name, partitions, client) not in figures:
                continue
            rates = [f["records_per_s"] for f in figures[(name, partitions, client)]]
            cpu = [f["cpu_s_per_gb"] for f in figures[(name, partitions, client)]]
            versus_kafka = _shown([r / k for r, k in zip(rates, kafka_rates)], ".2f") if kafka_rates else "-"
            print(f"| {partitions:,}, {client} | {name} | {_shown(rates, ',.0f')} | {_shown([r / b for r, b in zip(rates, base)], '.2f')} "
                  f"| {versus_kafka} | {_shown(cpu, '.2f')} |")


def _shown(values: list[float], form: str) -> str:
    s = spread(values)
    return f"{s.median:{form}} [{s.low:{form}}–{s.high:{form}}]"


if __name__ == "__main__":
    main()
