"""Replication benchmarks (issue 18): produce throughput of one node against a 3-node broker group
(acks=1 and acks=all), follower lag under full load, produce latency with acks=1 and acks=all, and
failover time over repeated SIGKILLs of the master. Gregor and Apache Kafka 3.9 run in the same
run when Kafka's jars are resolved (bin/setup-kafka) and tests/kit/kafka_cluster.py is there.

What runs, per round (--repeat, default 3; every figure is the median over the rounds with the
lowest and highest round):

- Throughput. One fresh node (RF=1), then one fresh 3-node group (Gregor: a broker group
  coordinated by a private ZooKeeper, bin/zookeeper; Kafka: a 3-node KRaft cluster, RF=3). Each is
  warmed up past its first commitlog segment (as bench/run.py), then bench/loadgen.py's producer
  (confluent-kafka in a child process: 1 KiB values, linger 5 ms, batch.size 1 MB, no compression,
  round-robin over the partitions) writes for --seconds per case: one node with acks=1, the group
  with acks=1 and with acks=all, each at 1 partition and at --partitions (Gregor: 10,000, in topics
  of 1,000; Kafka: --kafka-partitions, 1,000 by default: 10,000 partitions at RF=3 is 30,000
  replicas in three 512 MB JVMs on this 2-core machine). Broker CPU per GB is summed over all
  nodes; the producer's own CPU per GB, and its busiest thread's share of a core, are given
  beside it. Then each case again with equal batches (bench/direct_producer.py: batches of
  EQUAL_BATCH_RECORDS x 1 KiB, one per request, the partitions in turn, requests built once):
  librdkafka sends about one record per batch at 10,000 partitions, and its one thread per broker
  is then busy nearly all the time, so the partition count is not the only thing that changes;
  with equal batches it is. Before each case the page cache is filled (bench/page_cache.py;
  --cold-page-cache: not): this VM charges a host fault for each page it takes back from its
  host, and three nodes on one machine write three copies, where separate machines would pay for
  theirs in parallel.
- Follower lag (Gregor group). While the producer writes at full speed with acks=1 to one
  partition, each node's admin HTTP API (/metrics, `gregor_partition_end_offset`: the partition's
  high watermark) is read every LAG_INTERVAL_S. Followers answer ListOffsets with
  NOT_LEADER_OR_FOLLOWER (Fetch v11+ only up to their high watermark) and expose no log end, so
  a follower's high watermark - what it holds and knows the group committed - is compared with
  the master's log end, known from the producer's
  delivery reports (every 256th record's offset and when it was acknowledged). Lag is the master's
  log end minus that, in records x 1 KiB, and in time: how long before the sample the master had
  reached the follower's position. The master's own high watermark (what its sync-state set
  acknowledged) is shown beside it, and, where the broker has it, the master's own
  `gregor_replication_follower_lag_bytes` per follower (commitlog bytes from the log end to the
  position the follower last reported holding), read in the same scrapes.
- Latency. LATENCY_RATE records/s of 1 KiB, linger 0, to one partition: the time from produce()
  to the delivery report, p50 and p99 (the first second not counted), one node with acks=1 and the
  group with acks=1 and acks=all.
- Failover. A fresh 3-node group (Gregor: 64 MiB segments, zookeeper.session.timeout.ms=4000;
  Kafka: broker.session.timeout.ms=4000, as the floor is the same) with a 1-partition RF=3 topic
  and a prober (confluent-kafka, acks=all, linger 0, one record every PROBE_INTERVAL_S). --kills
  times (Kafka: --kafka-kills): SIGKILL the master (Kafka: the partition leader's node), time
  until ZooKeeper names a new live master (Kafka: until Metadata names a new leader), until the new
  master first acknowledges an acks=all Produce request sent straight to every surviving node
  (DirectProbe: the broker's part, without librdkafka's once-a-second leader lookup), and until the
  prober's next acks=all write is acknowledged; restart the node, wait for a full sync-state set
  (Kafka: ISR of 3), again. Then --stops clean stops the same way (SIGTERM: Kafka's controlled
  shutdown), where the prober's figure is the longest pause between its acknowledgements; an
  acks=1 load of numbered records to a second topic led by the same node runs meanwhile, and the
  acknowledged records missing from that topic afterwards are counted (acks1_losses).

A full run (the defaults, Kafka included) takes about an hour on the 2-core machine; --quick with
--repeat 1, or --only failover --gregor-only --repeat 1, a few minutes.

Targets (issue 18): acks=all RF=3 >= 50% of RF=1; replicated throughput at 10,000 partitions >= 90%
of at 1 partition; failover p50 <= 5 s. Rewrites the "Replication (issue 18)" section of
docs/benchmarks.md. Everything listens on 127.0.0.1; only the processes started here are stopped.

Run: .venv/bin/python bench/replication_bench.py [--repeat N] [--seconds S] [--gregor-only] [--quick]
                                                 [--no-docs] [--kills N] [--kafka-kills N] [--stops N]
                                                 [--partitions N] [--kafka-partitions N] [--json PATH]
                                                 [--cold-page-cache] [--only STEP ...]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import numpy as np
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import ROOT, MeasuredProcess
from docs_section import replace_section
from figures import Spread, spread
from page_cache import Ballast

if str(ROOT) not in sys.path:  # tests.kit starts the brokers
    sys.path.insert(0, str(ROOT))

SECTION = ("<!-- replication:start -->", "<!-- replication:end -->")
LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
DIRECT_PRODUCER = Path(__file__).resolve().parent / "direct_producer.py"
EQUAL_BATCH_RECORDS = 64  # the equal-batch cases: 64 x 1 KiB per batch, one batch per request, at every partition count
EQUAL_BATCH_IN_FLIGHT = 5
CLIENTS = ("librdkafka", "equal-batches")  # the producers of each throughput case
VALUE = 1024
MAX_BYTES = 3 << 30  # at most this much per throughput case (as bench/run.py's produce phases)
# What a 3-node group's replicated step writes per second of --seconds (all nodes): 58 GB with
# 10 s cases on 2026-11-28 (fewer bytes than seconds x rate: cases stop at MAX_BYTES)
STEP_DISK_PER_S = 6 << 30
LAG_CASE_BYTES_PER_S = 600 << 20  # the follower-lag case has no byte limit: at most this fast per node


def case_disk(seconds: float) -> int:
    """Disk a 3-node case may write (3 copies), with room to spare: the page-cache ballast keeps
    this free before each case. The group's data grows over a step (about 20 GB a node over
    the replicated step's 10 s cases), and the ballast shrinks to make room for it."""
    return 3 * max(MAX_BYTES, int(seconds * LAG_CASE_BYTES_PER_S)) * 21 // 20 + (2 << 30)
SESSION_TIMEOUT_MS = 4000  # Gregor's zookeeper.session.timeout.ms: the failover floor
KAFKA_CLUSTER = {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}  # Kafka's default: 9000
NODE_HEAP = "512m"  # tests/kit/kafka_cluster.py's per-node heap; the single Kafka node gets the same
FAILOVER_SEGMENT = 64 << 20
QUICK_SEGMENT = 64 << 20
TOPIC_PARTITION_LIMIT = 1_000  # larger counts are split over topics of this many (bench/workloads.py)
CREATE_BATCH_PARTITIONS = 5_000  # per CreateTopics call (bench/run.py)
LAG_INTERVAL_S = 0.2
LAG_MARK_EVERY = 256
LATENCY_RATE = 200  # records/s, one per request: a 3-node Kafka (512 MB JVMs, 2 cores) fell behind at 1,000
LATENCY_WARM_UP_S = 1.0  # the first second's records are not counted (connections, metadata of a new topic)
PROBE_INTERVAL_S = 0.01
STALE_ACK_S = 0.5  # a prober ack within this of the kill answers a request the old master served
ACKS1_INTERVAL_S = 0.0001  # the clean stops' acks=1 load: one numbered record this often (linger 5 ms)
ACKS1_SIZE = 100
CLEAN_STOP_WATCH_S = 1.0  # a clean stop's pauses are looked for until this long after the prober's first
# acknowledgement after the new master was named

# The child processes: follower-lag load, fixed-rate latency and the failover prober. bench/loadgen.py's
# producer settings, with delivery reports for the sampled records (loadgen reports only errors).
CHILD = r"""
import functools, json, sys, time
from confluent_kafka import Producer

spec = json.loads(sys.argv[1])
now = time.monotonic  # CLOCK_MONOTONIC: the parent's clock too
common = {"bootstrap.servers": spec["bootstrap"], "acks": spec["acks"], "batch.size": 1_000_000,
          "message.max.bytes": 1_048_576, "compression.type": "none", "enable.idempotence": False,
          "queue.buffering.max.kbytes": 131_072, "queue.buffering.max.messages": 500_000,
          "delivery.report.only.error": False}
topic, value, mode = spec["topic"], b"x" * spec["size"], spec["mode"]
failed = 0


def count_failure(err):
    global failed
    failed += 1


if mode == "lag":
    producer = Producer({**common, "linger.ms": 5})
    marks = []

    def mark(err, msg):
        if err is None:
            marks.append((now(), msg.offset()))
        else:
            count_failure(err)

    every, sent = spec["every"], 0
    start = time.perf_counter()
    deadline = start + spec["seconds"]
    while True:
        try:
            if sent % every == 0:
                producer.produce(topic, value, partition=0, on_delivery=mark)
            else:
                producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.002)
            continue
        sent += 1
        if sent & 1023 == 0:
            producer.poll(0)
            if time.perf_counter() > deadline:
                break
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    print(json.dumps({"sent": sent, "undelivered": left, "failed": failed, "seconds": elapsed,
                      "mb_per_s": (sent - left) * len(value) / elapsed / 1e6, "marks": marks}))
elif mode == "latency":
    producer = Producer({**common, "linger.ms": 0})
    latencies = []

    def done(sent_at, err, msg):
        if err is None:
            latencies.append((sent_at, now()))
        else:
            count_failure(err)

    rate, count = spec["rate"], int(spec["rate"] * (spec["warm_up"] + spec["seconds"]))
    started = now()
    start = time.perf_counter()
    for i in range(count):
        due = start + i / rate
        while (t := time.perf_counter()) < due:
            producer.poll(min(due - t, 0.001))
        producer.produce(topic, value, partition=0, on_delivery=functools.partial(done, now()))
        producer.poll(0)
    left = producer.flush(60)
    begin, end = started + spec["warm_up"], started + spec["warm_up"] + spec["seconds"]
    print(json.dumps({"sent": count, "undelivered": left, "failed": failed,
                      "latency_s": [acked - sent_at for sent_at, acked in latencies if sent_at >= begin],
                      "acked_in_window": sum(begin <= acked < end for _, acked in latencies)}))
elif mode == "numbered":  # the clean stops' acks=1 load: numbered records, one line per acknowledged one
    producer = Producer({**common, "linger.ms": 5, "message.timeout.ms": 120_000})
    pad = value[12:]

    def acknowledged(seq, err, msg):
        if err is None:
            print(f"ok {now():.6f} {seq}", flush=True)

    seq, rate, start = 0, 1 / spec["interval"], time.perf_counter()
    while True:  # at the rate, produced in the bursts the 5 ms polls leave
        while seq < (time.perf_counter() - start) * rate:
            producer.produce(topic, b"%012d" % seq + pad, partition=0,
                             on_delivery=functools.partial(acknowledged, seq))
            seq += 1
        producer.poll(0.005)
else:  # probe: one acks=all record every interval until terminated; one line per delivery report
    producer = Producer({**common, "linger.ms": 0, "message.timeout.ms": 120_000})

    def report(sent_at, err, msg):
        if err is None:
            print(f"ok {now():.6f} {sent_at:.6f}", flush=True)
        else:
            print(f"err {now():.6f} {err.name()}", flush=True)

    interval = spec["interval"]
    while True:
        producer.produce(topic, value, partition=0, on_delivery=functools.partial(report, now()))
        producer.poll(interval)
"""


class Pid(MeasuredProcess):
    """/proc readings (CPU, write bytes) of a broker process started by tests/ fixtures."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc


@dataclass
class System:
    """One system under test: a single node or a 3-node group of one broker kind."""

    broker: str  # "gregor" or "kafka"
    nodes: int
    bootstrap: str
    rf: int
    procs: Callable[[], list[MeasuredProcess]]
    logs: Callable[[], str]
    group: object | None = None  # tests.kit.group.BrokerGroup or tests.kit.kafka_cluster.KafkaCluster
    zk_connect: str = ""

    def cpu(self) -> float:
        return sum(p.cpu_seconds() for p in self.procs())

    def check_alive(self) -> None:
        for p in self.procs():
            if p.exit_status() is not None:
                raise RuntimeError(f"a {self.broker} node exited with status {p.exit_status()}; logs:\n"
                                   f"{self.logs()[-4000:]}")

    def wait_idle(self) -> float:
        started = time.monotonic()
        for p in self.procs():
            p.wait_idle()
        return time.monotonic() - started


@dataclass
class Run:
    args: argparse.Namespace
    tmp: Path
    zk: object | None = None  # tests.kit.zookeeper.ZooKeeperProcess, started once for the whole run
    results: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ballast: Ballast | None = None  # None: --cold-page-cache, or no fincore
    short_gib: float = 0.0  # the most a top-up could not write for want of disk

    def fill_page_cache(self) -> None:
        """Before a measured case: a full page cache (bench/page_cache.py), with the nodes idle."""
        if self.ballast is not None:
            self.ballast.top_up()
            self.short_gib = max(self.short_gib, self.ballast.short / 2**30)

    def record(self, **figure) -> dict:
        self.results.append(figure)
        return figure


# ---- the systems ----------------------------------------------------------------------------
def _discard(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def gregor_single(run: Run, segment: int) -> Iterator[System]:
    from tests.kit.gregor import BrokerProcess
    data = run.tmp / f"gregor-single-{uuid.uuid4().hex[:6]}"
    node = BrokerProcess(data / "node", {"commitlog.segment.bytes": str(segment)})
    data.mkdir(parents=True)
    try:
        node.start(timeout=180)
        yield System("gregor", 1, node.bootstrap, 1, lambda: [Pid(node.proc)], node.log)
    finally:
        if node.proc is not None:
            node.stop(signal.SIGKILL)  # its data is deleted next
        _discard(data)


@contextmanager
def gregor_group(run: Run, name: str, segment: int, admin: bool = False,
                 settings: dict[str, str] | None = None) -> Iterator[System]:
    from tests.kit.group import BrokerGroup
    data = run.tmp / f"gregor-{name}-{uuid.uuid4().hex[:6]}"
    data.mkdir(parents=True)
    connect = f"{run.zk.connect}/bench-{uuid.uuid4().hex[:12]}"
    group = BrokerGroup(data, connect, 3, name, {"commitlog.segment.bytes": str(segment),
                                                  "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                                  **(settings or {})})
    if admin:
        for node in group.nodes.values():
            node.extra_args = ["--admin-port", "0"]
    try:
        for node in group.nodes.values():
            node.start(timeout=180)
        group.wait_sync_state_set(3, timeout=120)
        yield System("gregor", 3, group.bootstrap, 3, lambda: [Pid(n.proc) for n in group.nodes.values()],
                     lambda: "".join(f"--- node {i} ---\n{n.log()[-3000:]}" for i, n in group.nodes.items()),
                     group, connect)
    finally:
        group.stop()  # SIGKILL, by PID, each node still running
        _discard(data)


@contextmanager
def kafka_single(run: Run) -> Iterator[System]:
    from tests.kit.kafka import KafkaBroker
    data = run.tmp / f"kafka-single-{uuid.uuid4().hex[:6]}"
    kafka = KafkaBroker(data, {}, heap=NODE_HEAP)
    try:
        kafka.start(timeout=180)
        yield System("kafka", 1, kafka.bootstrap, 1, lambda: [Pid(kafka.proc)], kafka.log)
    finally:
        if kafka.proc is not None and kafka.proc.poll() is None:
            kafka.proc.kill()  # a clean shutdown checkpoints every partition for data deleted right after
            kafka.proc.wait(30)
        kafka.stop()
        _discard(data)


@contextmanager
def kafka_cluster(run: Run, settings: dict[str, str], inter_broker: str = "PLAINTEXT") -> Iterator[System]:
    from tests.kit.kafka_cluster import KafkaCluster
    data = run.tmp / f"kafka-cluster-{uuid.uuid4().hex[:6]}"
    cluster = KafkaCluster(data, settings, inter_broker=inter_broker)
    try:
        cluster.start(timeout=300)
        yield System("kafka", 3, cluster.bootstrap, 3,
                     lambda: [Pid(n.proc) for n in cluster.nodes.values()], cluster.log, cluster)
    finally:
        for node in cluster.nodes:
            cluster.kill(node)  # SIGKILL by PID: the data is deleted next
        _discard(data)


def kafka_cluster_available() -> str | None:
    """Why the Kafka cluster cannot run, or None."""
    try:
        import tests.kit.kafka_cluster  # noqa: F401
    except ImportError as exc:
        return f"tests/kit/kafka_cluster.py cannot be imported: {exc}"
    return None


# ---- topics and clients ---------------------------------------------------------------------
def create_topics(bootstrap: str, names: list[str], partitions: int, rf: int) -> float:
    """As bench/run.py's create_topics, with a replication factor: at most CREATE_BATCH_PARTITIONS
    partitions per call, then until every partition has a leader in Metadata; returns the seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    per_call = max(1, CREATE_BATCH_PARTITIONS // partitions)
    started = time.perf_counter()
    for i in range(0, len(names), per_call):
        futures = admin.create_topics([NewTopic(n, partitions, rf) for n in names[i:i + per_call]],
                                      operation_timeout=120, request_timeout=180)
        for future in futures.values():
            future.result()
    deadline = time.monotonic() + 180
    while True:
        topics = admin.list_topics(timeout=10).topics
        if all(name in topics and topics[name].error is None and len(topics[name].partitions) == partitions
               and all(p.leader >= 0 and p.error is None for p in topics[name].partitions.values())
               for name in names):
            return time.perf_counter() - started
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(names)} topics of {partitions} partitions had no leaders after 180 s")
        time.sleep(0.1)


def many_topics(count: int) -> tuple[list[str], int]:
    per_topic = min(count, TOPIC_PARTITION_LIMIT)
    return [f"many-{i}" for i in range(count // per_topic)], per_topic


def child(argv: list[str], timeout: float) -> dict:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"client {argv[0]} exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(lines[-1])


def produce(system: System, topics: list[str], per_topic: int, acks: str, seconds: float,
            max_bytes: int = MAX_BYTES) -> dict:
    """bench/loadgen.py's produce mode; returns its result with the CPU all nodes spent meanwhile."""
    return _measured(system, LOADGEN, {
        "mode": "produce", "bootstrap": system.bootstrap, "topics": topics, "partitions_per_topic": per_topic,
        "size": VALUE, "acks": acks, "seconds": seconds, "max_messages": max_bytes // VALUE,
        "max_seconds": seconds + 120}, seconds)


def produce_equal_batches(system: System, topics: list[str], per_topic: int, acks: str, seconds: float) -> dict:
    """bench/direct_producer.py: batches of EQUAL_BATCH_RECORDS records, one per request, the
    partitions in turn; at 1 partition and at many the same requests, but for the partition
    they name."""
    result = _measured(system, DIRECT_PRODUCER, {
        "bootstrap": system.bootstrap, "topics": topics, "partitions_per_topic": per_topic, "size": VALUE,
        "batch_records": EQUAL_BATCH_RECORDS, "request_bytes": EQUAL_BATCH_RECORDS * VALUE,
        "in_flight": EQUAL_BATCH_IN_FLIGHT, "acks": acks, "seconds": seconds, "max_bytes": MAX_BYTES}, seconds)
    if result["errors"]:
        raise RuntimeError(f"bench/direct_producer.py: {result['errors']}")
    return result


def _measured(system: System, script: Path, spec: dict, seconds: float) -> dict:
    """A client script's result, with the CPU all nodes spent while it ran, and the kernel's
    memory work meanwhile (kernel_memory)."""
    before, memory = system.cpu(), kernel_memory()
    result = child([str(script), json.dumps(spec)], timeout=seconds + 400)
    result["cpu_s"] = system.cpu() - before
    result["kernel"] = {k: v - memory.get(k, 0) for k, v in kernel_memory().items()}
    system.check_alive()
    return result


KERNEL_THREADS = ("kswapd", "kcompactd")  # the kernel's reclaim and compaction threads


def kernel_memory() -> dict[str, float]:
    """Counters of the kernel's memory work, machine-wide (every process's, the ballast's too):
    direct compaction stalls and the pages compaction scanned (/proc/vmstat: allocations of
    large folios, as page-cache readahead makes, compact a fragmented memory first), pages
    reclaimed, and the CPU seconds of kswapd and kcompactd. Empty where /proc is not Linux's."""
    counters: dict[str, float] = {}
    try:
        with open("/proc/vmstat") as f:
            vm = dict(line.split() for line in f)
    except OSError:
        return counters
    counters["compact_stalls"] = int(vm.get("compact_stall", 0))
    counters["compact_scanned"] = int(vm.get("compact_migrate_scanned", 0)) + int(vm.get("compact_free_scanned", 0))
    counters["reclaimed"] = sum(int(v) for k, v in vm.items() if k.startswith("pgsteal_"))
    cpu = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.index("(") + 1:].startswith(KERNEL_THREADS):
            fields = stat[stat.rindex(")") + 2:].split()
            cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    counters["kernel_threads_cpu_s"] = cpu
    return counters


def warm_up(system: System, segment: int) -> None:
    """Write past the first commitlog segment before measuring (bench/run.py's warm_up): a fresh
    Gregor's first segment is resident before it listens, later ones fault their pages in; for
    Kafka it is the JIT's warm-up. Then wait until every node is idle (followers caught up). Not
    before: a Gregor group's master never looks idle until its first append (its followers'
    replication streams are answered at once instead of after IDLE_WAIT_S: ~0.6 of a core on the
    master, ~0.2 on each follower, measured with this file's tools)."""
    create_topics(system.bootstrap, ["warm-up"], 1, system.rf)
    produce(system, ["warm-up"], 1, "1", 120, max_bytes=segment + segment // 4)
    if system.nodes > 1:  # and the acks=all path (Kafka's JIT: its first acks=all case ran 10x slower)
        system.wait_idle()
        produce(system, ["warm-up"], 1, "all", 60, max_bytes=segment // 4)
    system.wait_idle()


def sync_state_set(system: System) -> list[int] | None:
    if system.broker != "gregor" or system.group is None:
        return None
    record, _ = system.group.state()
    return record["sync_state_set"] if record else None


# ---- throughput -----------------------------------------------------------------------------
def throughput_cases(run: Run, system: System, rnd: int, many: int, acks_modes: list[str]) -> None:
    """Each (acks, partitions) case with librdkafka (bench/loadgen.py: the client batches as it
    will), then with equal batches (bench/direct_producer.py: the partition count is the only
    difference)."""
    seconds = run.args.seconds
    topics, per_topic = many_topics(many)
    cases = [(client, acks, n) for client in CLIENTS for n in (1, many) for acks in acks_modes]
    if rnd % 2:
        cases.reverse()
    for client, acks, n in cases:
        system.wait_idle()
        run.fill_page_cache()
        names, per = (["p1"], 1) if n == 1 else (topics, per_topic)
        measure = produce if client == "librdkafka" else produce_equal_batches
        result = measure(system, names, per, acks, seconds)
        in_set = sync_state_set(system)
        busiest = result.get("busiest_thread")
        fig = run.record(kind="produce", client=client, broker=system.broker, nodes=system.nodes, acks=acks,
                         partitions=n, round=rnd, msgs_per_s=result["msgs_per_s"], mb_per_s=result["mb_per_s"],
                         seconds=result["seconds"], delivered=result["delivered"], failed=result["failed"],
                         undelivered=result["undelivered"],
                         cpu_s_per_gb=result["cpu_s"] / (result["delivered"] * VALUE / 1e9) if result["delivered"] else None,
                         client_cpu_s_per_gb=(result["client_cpu_s"] / (result["delivered"] * VALUE / 1e9)
                                              if result["delivered"] else None),
                         busiest_thread=busiest[0].split("/")[0] if busiest else None,
                         busiest_thread_share=busiest[1] / result["seconds"] if busiest else None,
                         failed_by_error=result.get("failed_by_error") or {}, sync_state_set=in_set,
                         kernel=result["kernel"])
        trouble = f", {result['failed']} failed{_by_error(fig)}, {result['undelivered']} undelivered" \
            if result["failed"] or result["undelivered"] else ""
        in_set_text = f", sync-state set {in_set}" if in_set is not None else ""
        busy = f", busiest client thread {fig['busiest_thread']} {fig['busiest_thread_share']:.0%}" if busiest else ""
        print(f"  {system.broker:6} {client:10} {system.nodes} node(s) acks={acks:3} {n:>6,} partitions: "
              f"{fig['mb_per_s']:7.1f} MB/s {fig['msgs_per_s']:>10,.0f} rec/s "
              f"(CPU {fig['cpu_s_per_gb'] or 0:.1f} s/GB, client {fig['client_cpu_s_per_gb'] or 0:.1f} s/GB"
              f"{busy}{in_set_text}{trouble}){_kernel_text(fig)}", flush=True)


def _by_error(fig: dict) -> str:
    """The failed records by the error the broker answered (bench/direct_producer.py's)."""
    by = fig.get("failed_by_error")
    return f" ({', '.join(f'{name}: {n}' for name, n in sorted(by.items()))})" if by else ""


def _kernel_text(fig: dict) -> str:
    """The kernel's memory work during a case, per GB delivered (kernel_memory)."""
    k, gb = fig.get("kernel"), fig["delivered"] * VALUE / 1e9
    if not k or not gb:
        return ""
    return (f"; kernel per GB: {k['reclaimed'] * 4096 / 1e9 / gb:.1f} GB reclaimed, "
            f"{k['compact_stalls'] / gb:,.0f} compaction stalls, {k['compact_scanned'] / gb / 1e6:.1f}M pages "
            f"scanned by compaction, kswapd+kcompactd {k['kernel_threads_cpu_s'] / gb:.2f} CPU s")


def latency_cases(run: Run, system: System, rnd: int, acks_modes: list[str]) -> None:
    seconds = min(run.args.seconds, 10.0)
    modes = acks_modes if rnd % 2 == 0 else acks_modes[::-1]
    for acks in modes:
        system.wait_idle()
        spec = {"mode": "latency", "bootstrap": system.bootstrap, "topic": "latency", "acks": acks, "size": VALUE,
                "rate": LATENCY_RATE, "seconds": seconds, "warm_up": LATENCY_WARM_UP_S}
        result = child(["-c", CHILD, json.dumps(spec)], timeout=seconds + 120)
        system.check_alive()
        lat = np.array(result["latency_s"]) * 1000
        if not len(lat):
            raise RuntimeError(f"latency: no record acknowledged ({result['failed']} failed)")
        # Acknowledged at the rate sent, or a queue grew and the figures are its length, not a latency.
        sustained = result["acked_in_window"] >= 0.95 * LATENCY_RATE * seconds
        fig = run.record(kind="latency", broker=system.broker, nodes=system.nodes, acks=acks, round=rnd,
                         p50_ms=float(np.percentile(lat, 50)), p99_ms=float(np.percentile(lat, 99)),
                         max_ms=float(lat.max()), acked=len(lat), failed=result["failed"],
                         acked_per_s=result["acked_in_window"] / seconds, sustained=sustained)
        print(f"  {system.broker:6} {system.nodes} node(s) acks={acks:3} latency at {LATENCY_RATE:,}/s: "
              f"p50 {fig['p50_ms']:.2f} ms, p99 {fig['p99_ms']:.2f} ms, max {fig['max_ms']:.1f} ms"
              + ("" if sustained else f" (NOT sustained: {fig['acked_per_s']:.0f} acknowledged/s)"), flush=True)


def measure_single(run: Run, broker: str, rnd: int) -> None:
    args = run.args
    segment = QUICK_SEGMENT if args.quick else 1 << 30
    many = args.partitions if broker == "gregor" else args.kafka_partitions
    ctx = gregor_single(run, segment) if broker == "gregor" else kafka_single(run)
    with ctx as system:
        warm_up(system, segment)
        topics, per_topic = many_topics(many)
        create_topics(system.bootstrap, ["p1", "latency"], 1, 1)
        took = create_topics(system.bootstrap, topics, per_topic, 1)
        print(f"  {broker:6} 1 node: {many:,} partitions created in {took:.1f} s, idle after "
              f"{system.wait_idle():.1f} s", flush=True)
        latency_cases(run, system, rnd, ["1"])
        throughput_cases(run, system, rnd, many, ["1"])


def measure_replicated(run: Run, broker: str, rnd: int) -> None:
    args = run.args
    segment = QUICK_SEGMENT if args.quick else 1 << 30
    many = args.partitions if broker == "gregor" else args.kafka_partitions
    ctx = gregor_group(run, "tput", segment, admin=True) if broker == "gregor" else kafka_cluster(run, KAFKA_CLUSTER)
    with ctx as system:
        warm_up(system, segment)
        create_topics(system.bootstrap, ["p1", "latency", "lag"], 1, 3)
        system.wait_idle()
        if broker == "gregor":  # before the many-partition topics: /metrics lists every partition
            follower_lag(run, system, rnd)
        latency_cases(run, system, rnd, ["1", "all"])
        topics, per_topic = many_topics(many)
        took = create_topics(system.bootstrap, topics, per_topic, 3)
        print(f"  {broker:6} 3 nodes: {many:,} partitions created in {took:.1f} s, idle after "
              f"{system.wait_idle():.1f} s", flush=True)
        throughput_cases(run, system, rnd, many, ["1", "all"])


# ---- follower lag ---------------------------------------------------------------------------
ADMIN = re.compile(r"gregor admin API on http://([\d.]+:\d+)")


FOLLOWER_LAG = re.compile(r'^gregor_replication_follower_lag_bytes\{node="(\d+)"\} (\S+)$', re.MULTILINE)


def scrape(admin: str, topic: str) -> tuple[int | None, dict[int, float]]:
    """From a node's /metrics: partition 0's high watermark, and (on the master, since the broker has
    it) each follower's distance in commitlog bytes from the log end, by the position it last reported holding."""
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=2) as answer:
        text = answer.read().decode()
    hw = None
    for line in text.splitlines():
        if line.startswith("gregor_partition_end_offset{") and f'topic="{topic}"' in line \
                and 'partition="0"' in line:
            hw = int(float(line.rsplit(" ", 1)[1]))
    return hw, {int(node): float(value) for node, value in FOLLOWER_LAG.findall(text)}


def follower_lag(run: Run, system: System, rnd: int) -> None:
    group = system.group
    master = group.master()
    admins = {node: ADMIN.findall(n.log())[-1] for node, n in group.nodes.items()}
    spec = {"mode": "lag", "bootstrap": system.bootstrap, "topic": "lag", "acks": "1", "size": VALUE,
            "seconds": run.args.seconds, "every": LAG_MARK_EVERY}
    run.fill_page_cache()
    samples: list[tuple[int, float, int]] = []  # (node, when, high watermark)
    reported: list[tuple[float, float]] = []  # (when, MB) gregor_replication_follower_lag_bytes, both followers
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(spec)], stdout=out, stderr=err,
                                text=True, cwd=ROOT)
        try:
            deadline = time.monotonic() + run.args.seconds + 180
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("the follower-lag producer did not finish")
                tick = time.monotonic()
                for node, admin in admins.items():
                    before = time.monotonic()
                    hw, behind = scrape(admin, "lag")
                    when = (before + time.monotonic()) / 2
                    if hw is not None:
                        samples.append((node, when, hw))
                    if node == master:
                        reported += [(when, b / 1e6) for b in behind.values()]
                time.sleep(max(0.0, LAG_INTERVAL_S - (time.monotonic() - tick)))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        lines = out.read().strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"the follower-lag producer failed: {err.read()[-2000:]}")
        result = json.loads(lines[-1])
    system.check_alive()
    marks = np.array(result["marks"], dtype=np.float64)
    if len(marks) < 10:
        raise RuntimeError(f"the follower-lag producer acknowledged too few records: {result}")
    marks = marks[np.argsort(marks[:, 0], kind="stable")]
    when, ends = marks[:, 0], np.maximum.accumulate(marks[:, 1] + 1)  # master's log end known at `when`
    start, stop = when[0] + 1.0, when[-1]  # steady state: after the first second, until the last report
    lags: dict[str, list[tuple[float, float]]] = {"follower": [], "master": []}
    rates: dict[str, list[float]] = {"follower": [], "master": []}  # MB/s each node's high watermark advanced
    for node in admins:
        seen = [(t, hw) for n, t, hw in samples if n == node and start <= t <= stop]
        if len(seen) >= 2 and seen[-1][0] > seen[0][0]:
            rates["master" if node == master else "follower"].append(
                (seen[-1][1] - seen[0][1]) * VALUE / 1e6 / (seen[-1][0] - seen[0][0]))
    for node, t, hw in samples:
        if not start <= t <= stop:
            continue
        i = int(np.searchsorted(when, t, side="right")) - 1
        behind = max(0.0, ends[i] - hw)
        reached = int(np.searchsorted(ends, hw, side="left"))  # first report at or past the node's position
        late = max(0.0, t - when[reached]) if reached < len(when) else 0.0
        lags["master" if node == master else "follower"].append((behind * VALUE / 1e6, late * 1000))
    by_master = [mb for t, mb in reported if start <= t <= stop]
    if by_master:
        mb = np.array(by_master)
        fig = run.record(kind="lag", broker="gregor", who="reported", round=rnd, samples=len(mb),
                         mb_per_s=result["mb_per_s"], hw_mb_per_s=None, p50_mb=float(np.percentile(mb, 50)),
                         p99_mb=float(np.percentile(mb, 99)), max_mb=float(mb.max()), p50_ms=None, p99_ms=None,
                         max_ms=None)
        print(f"  gregor lag (followers' position by the master's gregor_replication_follower_lag_bytes, "
              f"{len(mb)} samples): p50 {fig['p50_mb']:.1f} MB, p99 {fig['p99_mb']:.1f} MB, "
              f"max {fig['max_mb']:.1f} MB", flush=True)
    for who, values in lags.items():
        if not values:
            continue
        mb = np.array([v[0] for v in values])
        ms = np.array([v[1] for v in values])
        fig = run.record(kind="lag", broker="gregor", who=who, round=rnd, samples=len(values),
                         mb_per_s=result["mb_per_s"],
                         hw_mb_per_s=statistics.mean(rates[who]) if rates[who] else None,
                         p50_mb=float(np.percentile(mb, 50)), p99_mb=float(np.percentile(mb, 99)), max_mb=float(mb.max()),
                         p50_ms=float(np.percentile(ms, 50)), p99_ms=float(np.percentile(ms, 99)), max_ms=float(ms.max()))
        print(f"  gregor lag ({who}, {len(values)} samples at {result['mb_per_s']:.0f} MB/s acks=1, high watermark "
              f"advancing {fig['hw_mb_per_s'] or 0:.0f} MB/s): "
              f"p50 {fig['p50_mb']:.1f} MB / {fig['p50_ms']:.0f} ms, p99 {fig['p99_mb']:.1f} MB / "
              f"{fig['p99_ms']:.0f} ms, max {fig['max_mb']:.1f} MB / {fig['max_ms']:.0f} ms", flush=True)


# ---- failover -------------------------------------------------------------------------------
class Prober:
    """A child producer writing one acks=all record every PROBE_INTERVAL_S; collects the times
    (CLOCK_MONOTONIC, shared with this process) its writes were acknowledged."""

    def __init__(self, bootstrap: str, topic: str, log: Path, mode: str = "probe", acks: str = "all",
                 size: int = VALUE, interval: float = PROBE_INTERVAL_S) -> None:
        spec = {"mode": mode, "bootstrap": bootstrap, "topic": topic, "acks": acks, "size": size,
                "interval": interval}
        self.numbers: list[int] = []  # mode "numbered": each acknowledged record's number, as acks
        self._err = open(log, "ab")  # noqa: SIM115 - the prober's stderr, open as long as it runs; closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(spec)], stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, cwd=ROOT)
        self.acks: list[float] = []
        self.errors: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            parts = line.split()
            if parts and parts[0] == "ok":
                if len(parts) == 3 and "." not in parts[2]:  # mode "numbered": "ok TIME NUMBER"
                    self.numbers.append(int(parts[2]))
                self.acks.append(float(parts[1]))
            elif parts:
                self.errors.append(line.strip())

    def first_ack_after(self, t: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            i = bisect.bisect_right(self.acks, t)
            if i < len(self.acks):
                return self.acks[i]
            if self.proc.poll() is not None:
                raise RuntimeError(f"the prober exited with {self.proc.returncode}")
            time.sleep(0.005)
        return None

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time without an acknowledgement between `start` and `end` (waits for `end`)."""
        time.sleep(max(0.0, end - time.monotonic()))
        times = [start] + self.acks[bisect.bisect_right(self.acks, start):bisect.bisect_right(self.acks, end)] + [end]
        return max(b - a for a, b in itertools.pairwise(times))

    def wait_steady(self, timeout: float = 60.0) -> None:
        """Until a write was acknowledged in the last half second."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acks and self.acks[-1] > time.monotonic() - 0.5:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the prober's writes are not acknowledged (last errors: {self.errors[-3:]})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


class DirectProbe:
    """From the kill on: acks=all Produce requests (v9, one 1 KiB record) straight to each surviving
    node, one thread per node, over the Kafka protocol without a client library, until one is
    acknowledged: when the new master (leader) first acknowledges a replicated write, without
    librdkafka's own Metadata timers."""

    def __init__(self, addresses: list[str], topic: str, timeout: float = 120.0) -> None:
        from kafka.record.default_records import DefaultRecordBatchBuilder
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"x" * VALUE, headers=[])
        self.records = bytes(builder.build())
        self.topic = topic
        self.deadline = 0.0
        self.timeout = timeout
        self.acked: float | None = None
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._probe, args=(a,), daemon=True) for a in addresses]

    def start(self) -> None:
        self.deadline = time.monotonic() + self.timeout
        for thread in self.threads:
            thread.start()

    def _probe(self, address: str) -> None:
        from kafka.protocol.producer import ProduceRequest

        from tests.kit.wire import WireClient
        data = ProduceRequest.TopicProduceData
        client = None
        try:
            while not self.done.is_set() and time.monotonic() < self.deadline:
                try:
                    client = client or WireClient(address, timeout=10)
                    answer = client.request(ProduceRequest[9](
                        transactional_id=None, acks=-1, timeout_ms=2000, topic_data=[data(
                            name=self.topic, partition_data=[data.PartitionProduceData(index=0, records=self.records)])]))
                    if answer.responses[0].partition_responses[0].error_code == 0:
                        now = time.monotonic()
                        if self.acked is None or now < self.acked:
                            self.acked = now
                        self.done.set()
                        return
                except (OSError, AssertionError):
                    if client is not None:
                        client.close()
                    client = None
                time.sleep(0.01)
        finally:
            if client is not None:
                client.close()

    def result(self, timeout: float) -> float | None:
        self.done.wait(timeout)
        self.done.set()
        for thread in self.threads:
            thread.join(15)
        return self.acked


def measure_failover(run: Run, broker: str, rnd: int) -> None:
    kills = run.args.kills if broker == "gregor" else run.args.kafka_kills
    ctx = gregor_group(run, "failover", FAILOVER_SEGMENT) if broker == "gregor" else kafka_cluster(run, KAFKA_CLUSTER)
    with ctx as system:
        create_topics(system.bootstrap, ["probe"], 1, 3)
        _create_beside(system, "acks-1", "probe")
        prober = Prober(system.bootstrap, "probe", run.tmp / f"prober-{broker}-{rnd}.log")
        try:
            stop_leader = gregor_kills if broker == "gregor" else kafka_kills
            stop_leader(run, system, prober, rnd, kills, signal.SIGKILL)
            if run.args.stops:
                load = Prober(system.bootstrap, "acks-1", run.tmp / f"acks-1-{broker}-{rnd}.log", mode="numbered",
                              acks="1", size=ACKS1_SIZE, interval=ACKS1_INTERVAL_S)
                try:
                    load.wait_steady()
                    signalled = stop_leader(run, system, prober, rnd, run.args.stops, signal.SIGTERM)
                finally:
                    load.stop()
                acks1_losses(run, system, broker, rnd, load, signalled)
        finally:
            prober.stop()


def _create_beside(system: System, name: str, beside: str) -> None:
    """A 1-partition RF=3 topic led by the node that leads `beside`: a Gregor group's topics all
    are. Kafka's with the same replica list in the same order: its controller then moves both
    leaderships to the same node at each stop (the first live member of the ISR in that order)."""
    if system.broker == "gregor":
        create_topics(system.bootstrap, [name], 1, 3)
        return
    admin = AdminClient({"bootstrap.servers": system.bootstrap, "log_level": 4})
    deadline = time.monotonic() + 60
    while (part := _kafka_partition(admin, beside)) is None or part.leader < 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {beside} has no leader after 60 s")
        time.sleep(0.1)
    replicas = list(part.replicas)
    admin.create_topics([NewTopic(name, 1, -1, replica_assignment=[replicas])],
                        operation_timeout=120)[name].result()
    deadline = time.monotonic() + 60
    while (part := _kafka_partition(admin, name)) is None or part.leader < 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} has no leader 60 s after it was created")
        time.sleep(0.1)


def _elect_preferred(admin: AdminClient, topics: list[str]) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    try:
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, 0) for t in topics]).result()
    except KafkaException:  # one already led by its preferred replica: the other moves all the same
        pass


def acks1_losses(run: Run, system: System, broker: str, rnd: int, load: Prober, signalled: list[float]) -> None:
    """The acks=1 load's acknowledged records that no longer are in the log once the stops are
    over, each counted against the last stop signalled before it was acknowledged (or the first
    stop), onto that stop's figure."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": system.bootstrap, "group.id": f"acks-1-count-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "log_level": 3})
    stored: set[int] = set()
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition("acks-1", 0), timeout=30)
        consumer.assign([TopicPartition("acks-1", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 300
        position = 0
        while position < high:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the acks=1 topic read to offset {position} of {high} in 300 s")
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    stored.add(int(msg.value()[:12]))
                    position = msg.offset() + 1
    finally:
        consumer.close()
    lost_per_stop = [0] * len(signalled)
    for at, number in zip(load.acks, load.numbers, strict=True):
        if number not in stored:
            lost_per_stop[max(bisect.bisect_right(signalled, at) - 1, 0)] += 1
    stops = [r for r in run.results if r["kind"] == "clean-stop" and r["broker"] == broker and r["round"] == rnd]
    for fig, lost in zip(stops, lost_per_stop, strict=True):
        fig["acks1_lost"] = lost
        fig["acks1_acked"] = len(load.numbers)
    print(f"  {broker:6} acks=1 load over {len(signalled)} clean stop(s): {len(load.numbers):,} records acknowledged, "
          f"{sum(lost_per_stop):,} of them lost (per stop: {lost_per_stop})", flush=True)


def _kill_figure(run: Run, broker: str, rnd: int, i: int, kills: int, victim: int, elected: int,
                 t0: float, t_elect: float, t_direct: float | None, prober: Prober, sig: int) -> None:
    """One kill's figures. SIGKILL: until the prober's next acks=all write (the ones answered in
    STALE_ACK_S after the kill were served before it). SIGTERM (a clean stop): the longest pause
    between the prober's acknowledgements, from the signal until CLEAN_STOP_WATCH_S after its
    first acknowledgement once the new master was named, since its writes may go on with hardly
    a pause."""
    if sig == signal.SIGKILL:
        t_write = prober.first_ack_after(t0 + STALE_ACK_S, 120)
        if t_write is None or t_direct is None:
            raise RuntimeError(f"no acks=all write acknowledged within 120 s of kill {i + 1} "
                               f"(direct: {t_direct}, producer: {t_write})")
        fig = run.record(kind="failover", broker=broker, round=rnd, kill=i, victim=victim, elected=elected,
                         to_master_s=t_elect - t0, to_direct_s=t_direct - t0, to_write_s=t_write - t0)
        print(f"  {broker:6} kill {i + 1}/{kills}: node {victim} -> {elected}: new master/leader after "
              f"{fig['to_master_s']:.2f} s, it acknowledges acks=all after {fig['to_direct_s']:.2f} s, the "
              f"producer's acks=all write after {fig['to_write_s']:.2f} s", flush=True)
        return
    t_write = prober.first_ack_after(t_elect, 120)
    if t_direct is None or t_write is None:
        raise RuntimeError(f"no acks=all write acknowledged within 120 s of clean stop {i + 1} "
                           f"(direct: {t_direct}, producer: {t_write})")
    pause = prober.longest_pause(t0, t_write + CLEAN_STOP_WATCH_S)
    fig = run.record(kind="clean-stop", broker=broker, round=rnd, stop=i, victim=victim, elected=elected,
                     to_master_s=t_elect - t0, to_direct_s=t_direct - t0, pause_s=pause)
    print(f"  {broker:6} clean stop {i + 1}/{kills}: node {victim} -> {elected}: new master/leader after "
          f"{fig['to_master_s']:.2f} s, it acknowledges acks=all after {fig['to_direct_s']:.2f} s, the "
          f"producer's acknowledgements paused {pause:.2f} s at most", flush=True)


def gregor_kills(run: Run, system: System, prober: Prober, rnd: int, kills: int, sig: int) -> list[float]:
    """`kills` times: signal the master (SIGKILL: a crash; SIGTERM: a clean stop) and time the
    handover (_kill_figure), then restart the node; returns when each signal was sent."""
    from kazoo.client import KazooClient
    group = system.group
    zk = KazooClient(hosts=system.zk_connect, timeout=10)
    zk.start(30)
    signalled = []
    try:
        for i in range(kills):
            group.wait_sync_state_set(3, timeout=180)
            prober.wait_steady()
            record = json.loads(zk.get(f"/groups/{group.name}/state")[0])
            victim = record["master"]
            direct = DirectProbe([group.address(n) for n in group.nodes if n != victim], "probe")
            t0 = time.monotonic()
            signalled.append(t0)
            group.nodes[victim].proc.send_signal(sig)  # not waiting for it to end: timed from the signal
            direct.start()
            deadline = t0 + 120
            while True:  # until ZooKeeper names another master that is live
                record = json.loads(zk.get(f"/groups/{group.name}/state")[0])
                live = {int(c) for c in zk.get_children("/brokers/ids")}
                if record["master"] != victim and record["master"] in live:
                    t_elect = time.monotonic()
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no new master 120 s after killing node {victim}: {record}, live {live}")
                time.sleep(0.01)
            t_direct = direct.result(120)
            _kill_figure(run, "gregor", rnd, i, kills, victim, record["master"], t0, t_elect, t_direct, prober, sig)
            group.kill(victim, sig)  # until it has ended
            group.restart(victim)
    finally:
        zk.stop()
        zk.close()
    return signalled


def _kafka_partition(admin: AdminClient, topic: str):
    meta = admin.list_topics(topic=topic, timeout=2).topics.get(topic)
    if meta is None or meta.error is not None or 0 not in meta.partitions:
        return None
    return meta.partitions[0]


def kafka_kills(run: Run, system: System, prober: Prober, rnd: int, kills: int, sig: int) -> list[float]:
    """gregor_kills for Kafka: the partition leader's node (SIGTERM: Kafka's controlled shutdown)."""
    cluster = system.group
    admin = AdminClient({"bootstrap.servers": system.bootstrap, "log_level": 3})
    signalled = []
    for i in range(kills):
        deadline = time.monotonic() + 180
        while True:  # a leader and an ISR of 3 again
            try:
                part = _kafka_partition(admin, "probe")
                load = _kafka_partition(admin, "acks-1") if sig == signal.SIGTERM else part
            except KafkaException:
                part = load = None
            if (part is not None and part.leader >= 0 and len(part.isrs) == 3 and load is not None
                    and len(load.isrs) == 3):  # the acks=1 load's too, led by the same node
                if load.leader == part.leader:
                    break
                _elect_preferred(admin, ["probe", "acks-1"])  # the same first replica: the same leader
            if time.monotonic() > deadline:
                raise RuntimeError(f"partition probe-0 not back to an ISR of 3: {part}")
            time.sleep(0.2)
        prober.wait_steady()
        victim = part.leader
        direct = DirectProbe([cluster.nodes[n].bootstrap for n in cluster.nodes if n != victim], "probe")
        t0 = time.monotonic()
        signalled.append(t0)
        cluster.nodes[victim].proc.send_signal(sig)
        direct.start()
        deadline = t0 + 120
        while True:
            try:
                part = _kafka_partition(admin, "probe")
            except KafkaException:
                part = None
            if part is not None and part.leader not in (-1, victim):
                t_elect = time.monotonic()
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no new leader of probe-0 120 s after killing node {victim}: {part}")
            time.sleep(0.01)
        t_direct = direct.result(120)
        _kill_figure(run, "kafka", rnd, i, kills, victim, part.leader, t0, t_elect, t_direct, prober, sig)
        cluster.kill(victim, sig)  # until it has ended
        cluster.restart(victim, timeout=180)
    return signalled


# ---- the report -----------------------------------------------------------------------------
def _fmt(s: Spread | None, digits: int = 0, unit: str = "") -> str:
    if s is None:
        return "—"
    return f"{s.median:,.{digits}f}{unit} ({s.low:,.{digits}f}–{s.high:,.{digits}f})"


def _ratio(results: list[dict], num: dict, den: dict, metric: str = "mb_per_s") -> Spread | None:
    """num / den, both selected by their fields: median over median, range of the per-round ratios."""
    def pick(sel: dict) -> dict[int, float]:
        return {r["round"]: r[metric] for r in results
                if r["kind"] == "produce" and all(r.get(k) == v for k, v in sel.items())}
    a, b = pick(num), pick(den)
    if not a or not b:
        return None
    paired = [a[k] / b[k] for k in a if b.get(k)]
    if not paired or not statistics.median(b.values()):
        return None
    return Spread(statistics.median(a.values()) / statistics.median(b.values()), min(paired), max(paired),
                  len(paired))


def _handover_rows(lines: list[str], figures: list[dict], brokers: list[str],
                   metrics: tuple[str, ...]) -> dict[str, dict[str, list[float]]]:
    """A kill or clean-stop table's row per broker: each metric's p50 and max per round, given as
    the median over the rounds with their range; returns those per-round figures by broker."""
    per_round = {}
    for b in brokers:
        sel = [r for r in figures if r["broker"] == b]
        if not sel:
            continue
        by_round: dict[int, list[dict]] = {}
        for r in sel:
            by_round.setdefault(r["round"], []).append(r)
        stats = {f"{m}_{q}": [fn([r[m] for r in rs]) for rs in by_round.values()]
                 for m in metrics for q, fn in (("p50", statistics.median), ("max", max))}
        per_round[b] = stats
        lines.append(f"| {_label(b)} | {len(sel)} | " + " | ".join(
            f"{_fmt(spread(stats[f'{m}_p50']), 2, ' s')} / {_fmt(spread(stats[f'{m}_max']), 2, ' s')}"
            for m in metrics) + " |")
    return per_round


def _label(broker: str) -> str:
    return "Gregor" if broker == "gregor" else "Kafka 3.9.0"


def _verdict(s: Spread | None, goal: float, higher: bool = True) -> str:
    if s is None:
        return "not measured"
    met = s.median >= goal if higher else s.median <= goal
    return "**met**" if met else "**not met**"


def _settings(args: argparse.Namespace, brokers: list[str], meta: dict) -> str:
    segment = "64 MiB (--quick)" if args.quick else "1 GiB (the default)"
    text = ("Settings. Every node on 127.0.0.1 of this machine, the clients too. Producer: bench/loadgen.py "
            f"(confluent-kafka {meta['client']}, in its own process; 1 KiB values, no key, linger 5 ms, batch.size "
            f"1 MB, no compression, round-robin over the partitions), {args.seconds:g} s per case (at most 3 GiB), "
            "after a warm-up past the first commitlog segment; throughput counts the records delivered, flush "
            "included. Gregor: defaults (flush.mode=async, commitlog.segment.bytes "
            f"{segment}); a group is 3 nodes and one ZooKeeper 3.8 (bin/zookeeper, tick 500 ms), "
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, min.insync.replicas=1 (acks=all waits for the "
            f"whole sync-state set), topics of replication factor 3; {args.partitions:,} partitions are topics of "
            f"{min(args.partitions, TOPIC_PARTITION_LIMIT):,}.")
    if "kafka" in brokers:
        text += (f" Kafka 3.9.0: KRaft, each node broker and controller, a {NODE_HEAP} heap per JVM (the single node "
                 "too); the cluster is tests/kit/kafka_cluster.py's (internal topics RF 3, "
                 f"min.insync.replicas=2) with broker.session.timeout.ms={SESSION_TIMEOUT_MS} (default 9000; set "
                 f"as Gregor's session timeout), topics RF 3. Kafka's many-partition case is "
                 f"{args.kafka_partitions:,} partitions")
        if args.kafka_partitions < args.partitions:
            text += (f", not {args.partitions:,}: {args.partitions:,} partitions at RF=3 are "
                     f"{3 * args.partitions:,} replicas in three {NODE_HEAP} JVMs on 2 cores (bench/run.py measured a "
                     "single Kafka at 3,662 records/s at 10,000 partitions)")
        text += "."
    return text + " " + meta["page_cache"]


def report(run: Run, meta: dict) -> str:
    args, results = run.args, run.results
    produced = [r for r in results if r["kind"] == "produce"]
    brokers = [b for b in ("gregor", "kafka") if any(r["broker"] == b for r in results)]
    rounds = args.repeat
    many = {"gregor": args.partitions, "kafka": args.kafka_partitions}
    lines = [
        (f"Measured {meta['date']} on {meta['machine']} (load average {meta['load_before']:.1f} at the start), "
         f"{meta['source']}, `{meta['command']}`: {rounds} round(s), each figure the median with the lowest and "
         f"highest round. {meta['duration']}."),
        "",
        _settings(args, brokers, meta),
        "",
    ]
    for client in CLIENTS:
        rows = [r for r in produced if r["client"] == client]
        if not rows:
            continue
        if client == "librdkafka":
            lines += ["### Produce throughput", "",
                      ("bench/loadgen.py's producer, batching as librdkafka does: at 1 partition batches of up to 1 "
                       "MB, at many partitions about one record per batch (linger 5 ms spread over the "
                       "partitions). Client CPU: the producer process's, per GB delivered; its busiest thread's "
                       "CPU over the case's length (librdkafka builds every batch and request for a broker in "
                       "that broker's one thread, rdk:broker<N>: near 100% it is the client that sets the pace)."),
                      "", ("| broker | nodes | acks | partitions | MB/s | records/s | of 1 node | broker CPU s/GB "
                           "(all nodes) | client CPU s/GB | busiest client thread |"),
                      "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
        else:
            lines += ["", "### Produce throughput, equal batches", "",
                      (f"bench/direct_producer.py: batches of {EQUAL_BATCH_RECORDS} records of 1 KiB (no key, no "
                       "compression), one batch per Produce request, the partitions in turn, up to "
                       f"{EQUAL_BATCH_IN_FLIGHT} requests in flight per leader, each request built once and sent "
                       "again (the broker assigns offsets): at 1 partition and at many, the same requests, so the "
                       "partition count is the only difference. The client is a few Python threads that only "
                       "send and read error codes, so it does not set the pace at many partitions as librdkafka "
                       "does."),
                      "", ("| broker | nodes | acks | partitions | MB/s | records/s | of 1 node | broker CPU s/GB "
                           "(all nodes) | client CPU s/GB |"),
                      "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
        for b in brokers:
            for n in (1, many[b]):
                for nodes, acks in ((1, "1"), (3, "1"), (3, "all")):
                    sel = [r for r in rows if r["broker"] == b and r["partitions"] == n and r["nodes"] == nodes
                           and r["acks"] == acks]
                    if not sel:
                        continue
                    of = _ratio(results, {"client": client, "broker": b, "partitions": n, "nodes": nodes,
                                          "acks": acks},
                                {"client": client, "broker": b, "partitions": n, "nodes": 1, "acks": "1"})
                    cells = [_label(b), str(nodes), acks, f"{n:,}", _fmt(spread(r["mb_per_s"] for r in sel)),
                             _fmt(spread(r["msgs_per_s"] for r in sel)), _fmt(of, 2, "x"),
                             _fmt(spread(r["cpu_s_per_gb"] for r in sel if r["cpu_s_per_gb"] is not None), 1),
                             _fmt(spread(r["client_cpu_s_per_gb"] for r in sel
                                         if r.get("client_cpu_s_per_gb") is not None), 1)]
                    if client == "librdkafka":
                        shares = [r for r in sel if r.get("busiest_thread_share") is not None]
                        names = sorted({r["busiest_thread"] for r in shares})
                        cells.append(f"{', '.join(names)} {_fmt(spread(100 * r['busiest_thread_share'] for r in shares), 0, '%')}"
                                     if shares else "—")
                    lines.append("| " + " | ".join(cells) + " |")
    shrunk = [r for r in produced if r["broker"] == "gregor" and r["acks"] == "all" and r.get("sync_state_set") is not None
              and len(r["sync_state_set"]) < 3]
    if shrunk:
        lines += ["", (f"In {len(shrunk)} Gregor acks=all case(s) the sync-state set had fewer than 3 nodes at the "
                       "end: acks=all then waited for fewer followers.")]
    failures = [r for r in produced if r["failed"] or r["undelivered"]]
    if failures:
        lines += ["", "Records not delivered: " + "; ".join(
            f"{_label(r['broker'])} {r['nodes']} node(s) acks={r['acks']} {r['partitions']:,} partitions round "
            f"{r['round'] + 1}: {r['failed']} failed{_by_error(r)}, {r['undelivered']} undelivered"
            for r in failures) + "."]

    lags = [r for r in results if r["kind"] == "lag"]
    if lags:
        lines += ["", "### Follower lag under load (Gregor)", "",
                  (f"The 3-node group, acks=1 at full speed to one partition for {args.seconds:g} s; each node's "
                   f"/metrics read every {LAG_INTERVAL_S * 1000:.0f} ms. Behind: the master's log end (the producer's "
                   f"delivery reports, every {LAG_MARK_EVERY}th record) minus the node's high watermark, in records x "
                   "1 KiB, and how long before the sample the master had reached that position. A follower's high "
                   "watermark is what it holds and knows committed, so it trails its own log end by up to one "
                   "replication round trip. Advancing: how fast the high watermark moved over the same window, "
                   "against the producer's rate (while it is lower, the lag grows with the length of the run). "
                   "Where the broker has it, the master's own figure is read in the same scrapes: its commitlog end "
                   "minus the position each follower last reported holding, in commitlog bytes (batch headers included)."),
                  "", "| measured | produce MB/s | advancing MB/s | p50 behind | p99 behind | max behind |",
                  "|---|---:|---:|---:|---:|---:|"]
        for who, text in (("follower", "followers' high watermark"),
                          ("master", "master's high watermark (what the sync-state set holds)"),
                          ("reported", "followers' position, by the master (gregor_replication_follower_lag_bytes)")):
            sel = [r for r in lags if r["who"] == who]
            if sel:
                cells = [_fmt(spread(r[f"{q}_mb"] for r in sel), 1, " MB")
                         + ("" if sel[0][f"{q}_ms"] is None else f", {_fmt(spread(r[f'{q}_ms'] for r in sel), 0, ' ms')}")
                         for q in ("p50", "p99", "max")]
                advancing = _fmt(spread(r["hw_mb_per_s"] for r in sel if r["hw_mb_per_s"] is not None))
                lines.append(f"| {text} | {_fmt(spread(r['mb_per_s'] for r in sel))} | {advancing} | "
                             + " | ".join(cells) + " |")

    latency = [r for r in results if r["kind"] == "latency"]
    if latency:
        lines += ["", "### Produce latency", "",
                  (f"{LATENCY_RATE:,} records/s of 1 KiB to one partition, linger 0 (one record per request), "
                   f"{min(args.seconds, 10.0):g} s after a first second not counted: produce() to the delivery "
                   "report, on a fresh producer per case."), "",
                  "| broker | nodes | acks | p50 ms | p99 ms | rounds that kept pace |", "|---|---:|---|---:|---:|---:|"]
        for b in brokers:
            for nodes, acks in ((1, "1"), (3, "1"), (3, "all")):
                sel = [r for r in latency if r["broker"] == b and r["nodes"] == nodes and r["acks"] == acks]
                if sel:
                    kept = sum(1 for r in sel if r["sustained"])
                    lines.append(f"| {_label(b)} | {nodes} | {acks} | {_fmt(spread(r['p50_ms'] for r in sel), 2)} | "
                                 f"{_fmt(spread(r['p99_ms'] for r in sel), 2)} | {kept} of {len(sel)} |")
        if any(not r["sustained"] for r in latency):
            lines += ["", (f"A round that did not keep pace acknowledged fewer than 95% of the {LATENCY_RATE:,} "
                           "records/s sent: requests queued, and its figures grow with the length of the run.")]

    kills = [r for r in results if r["kind"] == "failover"]
    per_round: dict[str, dict[str, list[float]]] = {}
    if kills:
        lines += ["", "### Failover", "",
                  ("A fresh 3-node group per round (Gregor: commitlog.segment.bytes=64 MiB) with a 1-partition topic of "
                   f"RF 3 and a prober writing one acks=all record every {PROBE_INTERVAL_S * 1000:.0f} ms (librdkafka "
                   "defaults otherwise). Each kill: SIGKILL of the master (Kafka: of the partition leader's node), with "
                   "a full sync-state set (ISR of 3) before. Measured from the kill: until ZooKeeper names another live "
                   "master (Kafka: until Metadata names another leader); until the new master acknowledges an acks=all "
                   "Produce request sent straight to each surviving node every 10 ms (raw Kafka protocol, no client "
                   "library: the broker's part); and until the prober's next write is acknowledged (what an "
                   "application sees: it also waits for librdkafka's own Metadata timers). Then the node "
                   "is restarted. p50 and max are per round, each given as the median over the rounds with their "
                   "range."),
                  "", ("| broker | kills | new master p50 / max | master acknowledges acks=all p50 / max | "
                       "producer's acks=all write p50 / max |"), "|---|---:|---:|---:|---:|"]
        per_round = _handover_rows(lines, kills, brokers, ("to_master_s", "to_direct_s", "to_write_s"))

    stops = [r for r in results if r["kind"] == "clean-stop"]
    if stops:
        lines += ["", "### Clean stop (a rolling restart)", "",
                  ("The same groups after their kills: SIGTERM to the master (Kafka: to the partition leader's node, "
                   "whose controlled shutdown moves its leaderships before it stops), with a full sync-state set "
                   "(ISR of 3) before. Measured from the signal: until another live master is named (Kafka: leader), "
                   "until it acknowledges an acks=all Produce request sent straight to it, and the longest pause "
                   "between the prober's acknowledgements, from the signal until "
                   f"{CLEAN_STOP_WATCH_S:g} s after its first acknowledgement once the new master was named. p50 "
                   "and max per round, as above."),
                  "", ("| broker | stops | new master p50 / max | master acknowledges acks=all p50 / max | "
                       "longest pause in the producer's acks p50 / max |"), "|---|---:|---:|---:|---:|"]
        _handover_rows(lines, stops, brokers, ("to_master_s", "to_direct_s", "pause_s"))
        losses = []
        for b in brokers:
            sel = [r for r in stops if r["broker"] == b and "acks1_lost" in r]
            if sel:
                acked = sum({r["round"]: r["acks1_acked"] for r in sel}.values())
                lost = [r["acks1_lost"] for r in sel]
                losses.append(f"{_label(b)} lost {sum(lost):,} of {acked:,} acknowledged records over {len(sel)} "
                              f"stops (per stop: median {statistics.median(lost):g}, at most {max(lost):,})")
        if losses:
            lines += ["", (f"Meanwhile an acks=1 load wrote {1 / ACKS1_INTERVAL_S:,.0f} numbered "
                           f"{ACKS1_SIZE}-byte records/s (linger 5 ms) to a second 1-partition RF=3 topic led by "
                           "the same node (Kafka: the same replica list, so its controller moves both leaderships "
                           "together); once the stops were over the topic was read back, and each acknowledged "
                           "record missing from it was counted against the stop signalled last before it was "
                           "acknowledged: " + "; ".join(losses) + ".")]

    lines += ["", "### Targets", "", "| target | measured | |", "|---|---:|---|"]
    g_many = many["gregor"]
    for client, how in (("librdkafka", "librdkafka"), ("equal-batches", "equal batches")):
        for n in (1, g_many):
            s = _ratio(results, {"client": client, "broker": "gregor", "partitions": n, "nodes": 3, "acks": "all"},
                       {"client": client, "broker": "gregor", "partitions": n, "nodes": 1, "acks": "1"})
            lines.append(f"| Gregor acks=all RF=3 ≥ 50% of RF=1, {n:,} partition(s), {how} | {_fmt(s, 2, 'x')} | "
                         f"{_verdict(s, 0.5)} |")
    for client, how in (("librdkafka", "librdkafka"), ("equal-batches", "equal batches")):
        for acks in ("all", "1"):
            s = _ratio(results, {"client": client, "broker": "gregor", "partitions": g_many, "nodes": 3, "acks": acks},
                       {"client": client, "broker": "gregor", "partitions": 1, "nodes": 3, "acks": acks})
            single = _ratio(results, {"client": client, "broker": "gregor", "partitions": g_many, "nodes": 1,
                                      "acks": "1"},
                            {"client": client, "broker": "gregor", "partitions": 1, "nodes": 1, "acks": "1"})
            lines.append(f"| Gregor replicated (acks={acks}) at {g_many:,} partitions ≥ 90% of at 1 partition, {how} | "
                         f"{_fmt(s, 2, 'x')} (one node: {_fmt(single, 2, 'x')}) | {_verdict(s, 0.9)} |")
    g = per_round.get("gregor")
    for key, text in (("to_master_s_p50", "kill to new master"),
                      ("to_direct_s_p50", "kill to the new master acknowledging acks=all"),
                      ("to_write_s_p50", "kill to the producer's acks=all write")):
        s = spread(g[key]) if g else None
        lines.append(f"| Gregor failover p50 ≤ 5 s ({text}) | {_fmt(s, 2, ' s')} | {_verdict(s, 5.0, higher=False)} |")
    for client, how in (("librdkafka", "librdkafka"), ("equal-batches", "equal batches")):
        for n in (1, many["kafka"]):
            s = _ratio(results, {"client": client, "broker": "kafka", "partitions": n, "nodes": 3, "acks": "all"},
                       {"client": client, "broker": "kafka", "partitions": n, "nodes": 1, "acks": "1"})
            if s is not None:
                lines.append(f"| (Kafka, for comparison) acks=all RF=3 of RF=1, {n:,} partition(s), {how} | "
                             f"{_fmt(s, 2, 'x')} | |")
        s = _ratio(results, {"client": client, "broker": "kafka", "partitions": many["kafka"], "nodes": 3, "acks": "all"},
                   {"client": client, "broker": "kafka", "partitions": 1, "nodes": 3, "acks": "all"})
        if s is not None:
            lines.append(f"| (Kafka) replicated (acks=all) at {many['kafka']:,} partitions of at 1 partition, {how} | "
                         f"{_fmt(s, 2, 'x')} | |")
    if "kafka" in per_round:
        for key, text in (("to_master_s_p50", "new leader"), ("to_direct_s_p50", "leader acknowledges acks=all"),
                          ("to_write_s_p50", "the producer's acks=all write")):
            s = spread(per_round["kafka"][key])
            lines.append(f"| (Kafka) failover p50, kill to {text} | {_fmt(s, 2, ' s')} | |")

    notes = list(run.skipped) + [f"Failed: {e}" for e in run.errors]
    if notes:
        lines += ["", "Not measured in this run: " + " ".join(notes)]
    return "\n".join(lines)


# ---- the run --------------------------------------------------------------------------------
STEPS = ("single", "replicated", "failover")  # a round's steps, in this order on even rounds


def _source() -> str:
    def git(*argv: str) -> str:
        out = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
        return out.stdout.strip() if out.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return f"source tree {ROOT}"
    dirty = git("status", "--porcelain", "--", "broker", "store", "protocol")
    return f"commit {commit}" + (" with uncommitted changes in broker/store/protocol" if dirty else "")


def guarded(run: Run, title: str, measure, *argv) -> None:
    """One broken setup must not lose the others' figures: report it and go on."""
    started = time.monotonic()
    print(f"{title} (load {os.getloadavg()[0]:.2f})", flush=True)
    try:
        measure(run, *argv)
    except Exception as exc:  # noqa: BLE001 - kazoo's, librdkafka's, a child's: the next setup still runs
        text = str(exc).strip()
        print(f"  FAILED: {text[-3000:]}", flush=True)
        run.errors.append(f"{title}: {text.splitlines()[0][:300] if text else type(exc).__name__}.")
    print(f"  ({time.monotonic() - started:.0f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=None, help="per throughput case (default 10; --quick 3)")
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 s cases, 64 MiB segments, few kills")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--kills", type=int, default=None, help="Gregor master kills per round (default 20; --quick 3)")
    parser.add_argument("--kafka-kills", type=int, default=None,
                        help="Kafka leader kills per round (default 7: 21 over 3 rounds; --quick 2)")
    parser.add_argument("--stops", type=int, default=None,
                        help="clean stops (SIGTERM) of the master per round, each broker (default 5; --quick 1)")
    parser.add_argument("--partitions", type=int, default=10_000, help="Gregor's many-partition case")
    parser.add_argument("--kafka-partitions", type=int, default=1_000, help="Kafka's many-partition case")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--cold-page-cache", action="store_true",
                        help="no ballast: cases write into memory the VM may have handed back (bench/page_cache.py)")
    parser.add_argument("--only", choices=STEPS, action="append",
                        help="run only this step (repeatable); the report is printed, docs/benchmarks.md is kept")
    args = parser.parse_args()
    if args.only:
        args.no_docs = True  # a partial run must not replace the whole section's figures
    args.seconds = args.seconds or (3.0 if args.quick else 10.0)
    args.kills = args.kills if args.kills is not None else (3 if args.quick else 20)
    args.kafka_kills = args.kafka_kills if args.kafka_kills is not None else (2 if args.quick else 7)
    args.stops = args.stops if args.stops is not None else (1 if args.quick else 5)
    for name in ("partitions", "kafka_partitions"):
        n = getattr(args, name)
        if n > TOPIC_PARTITION_LIMIT and n % TOPIC_PARTITION_LIMIT:
            parser.error(f"--{name.replace('_', '-')} above {TOPIC_PARTITION_LIMIT:,} must be a multiple of it")

    from both_brokers import compared

    from tests.kit.zookeeper import ZOOKEEPER_JAR, ZooKeeperProcess
    if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
        print("ZooKeeper is not installed (bin/setup-zookeeper: apt-get install zookeeper)", file=sys.stderr)
        return 1
    brokers = compared(args.gregor_only)
    tmp = Path(tempfile.mkdtemp(prefix="gregor-replication-"))
    run = Run(args, tmp)
    if not args.cold_page_cache:
        why = Ballast.available()
        if why is None:
            run.ballast = Ballast(tmp / "page-cache-ballast", case_disk(args.seconds))  # deleted with tmp
        else:
            run.skipped.append(f"A full page cache before each case: {why}.")
    kafka_steps = list(STEPS)
    if args.gregor_only:
        run.skipped.append("Apache Kafka (--gregor-only).")
    elif "kafka" not in brokers:
        import kafka_process
        run.skipped.append(f"Apache Kafka: {kafka_process.unavailable()}.")
    else:
        why = kafka_cluster_available()
        if why:
            kafka_steps = ["single"]
            run.skipped.append(f"Kafka's 3-node cluster and failover: {why}.")
    free = shutil.disk_usage(tmp).free
    if free < STEP_DISK_PER_S * args.seconds and not args.quick:
        print(f"warning: {free / 2**30:.0f} GiB free under {tmp}; a 3-node group's replicated step writes up to "
              f"{STEP_DISK_PER_S * args.seconds / 2**30:.0f} GiB with {args.seconds:g} s cases, and a case that "
              f"finds the disk full reports its records failed (KafkaStorageError)", flush=True)
    command = "bench/replication_bench.py" + "".join(
        f" {a}" for a in sys.argv[1:] if a not in ("--no-docs",))
    meta = {"date": time.strftime("%Y-%m-%d"), "load_before": os.getloadavg()[0], "source": _source(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "client": f"{confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}",
            "command": command}
    started = time.monotonic()
    steps = {"single": measure_single, "replicated": measure_replicated, "failover": measure_failover}
    try:
        run.zk = ZooKeeperProcess(tmp / "zookeeper" / "data")
        (tmp / "zookeeper").mkdir(parents=True)
        run.zk.start()
        for rnd in range(args.repeat):
            order = brokers if rnd % 2 == 0 else brokers[::-1]
            for broker in order:
                names = list(STEPS) if broker == "gregor" else kafka_steps
                if rnd % 2:
                    names = [n for n in ("replicated", "single", "failover") if n in names]
                names = [n for n in names if not args.only or n in args.only]
                for name in names:
                    guarded(run, f"round {rnd + 1}/{args.repeat}, {broker}, {name} "
                            f"(at {time.monotonic() - started:.0f} s)", steps[name], broker, rnd)
    finally:
        if run.zk is not None:
            run.zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    if run.ballast is None:
        meta["page_cache"] = ("Page cache: cold (--cold-page-cache, or no fincore): each case writes into memory the "
                              "VM may have handed back to its host, which costs a host fault per page "
                              "(bench/page_cache.py).")
    else:
        meta["page_cache"] = ("Page cache: full before each throughput case and the follower-lag case (bench/page_cache.py: "
                              "clean ballast files written until MemFree stops falling, about 2 GiB on this VM), so "
                              "the brokers' new pages come from reclaim, as on a machine that has been up a while, "
                              "not from memory the VM handed back to its host (2.1-2.8 CPU s/GiB of host faults, "
                              "against 0.15-0.26 once the page cache is full)"
                              + (f"; up to {run.short_gib:.1f} GiB short for want of disk" if run.short_gib else "")
                              + ".")
    meta["duration"] = f"The run took {minutes:.0f} min"
    text = report(run, meta)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": run.results, "errors": run.errors,
                                         "skipped": run.skipped}, indent=1))
    if not args.no_docs:
        replace_section(ROOT / "docs" / "benchmarks.md", *SECTION, "## Replication (issue 18)\n\n" + text)
    return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
