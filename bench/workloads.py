"""What bench/run.py measures in each broker configuration, the same on Gregor and on Kafka.

A configuration is one fresh broker: "sizes-async" and "sizes-sync" (message sizes, consumer
profiles, acks, then end-to-end latency right after those throughput phases), "partitions-N"
(N partitions in topics of at most 1,000) and "backlog" (written, broker restarted, read cold).
Every figure is recorded under a workload id (e.g. "produce/1024/p10000") with its broker and
round, and bench/report.py turns those into the docs' tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from broker_process import ROOT, MeasuredProcess

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"

SIZES = (100, 1024, 16384)
PARTITION_COUNTS = (1, 100, 1_000, 10_000)
QUICK_PARTITION_COUNTS = (1, 1_000, 10_000)
TOPIC_PARTITION_LIMIT = 1_000  # larger counts are split over topics of this many partitions
# What each consume phase reads back, the same count from either broker: produce phases run
# until they have written at least this many. 300,000 x 1 KiB is the backlog of issue 16's
# consume figures.
CONSUME_MESSAGES = {True: {100: 1_000_000, 1024: 300_000, 16384: 20_000},
                    False: {100: 3_000_000, 1024: 1_000_000, 16384: 60_000}}
# At 10,000 partitions Kafka produced ~3,000 msg/s in a probe on the loaded 2-CPU machine.
PARTITION_MESSAGES = {True: 200_000, False: 500_000}
PARTITION_MESSAGES_10K = {True: 50_000, False: 100_000}
CONSUMER_PROFILES = ("bench", "defaults", "large-fetch")
LATENCY_RATE = 2_000
CONFIG_NAMES = ("sizes-async", "sizes-sync", "partitions", "partitions-N", "backlog")


@dataclass
class Target:
    """One fresh broker (or the --bootstrap one) for one configuration of one round."""
    broker: str  # "gregor" or "kafka"
    run: int
    config: str
    proc: MeasuredProcess | None
    bootstrap: str
    prefix: str  # topic-name prefix: unique per round on a --bootstrap broker, empty otherwise


def configs(quick: bool, only: str | None) -> list[tuple[str, object]]:
    """(name, measure(suite, broker, run)) for each configuration, in the order they run."""
    counts = QUICK_PARTITION_COUNTS if quick else PARTITION_COUNTS
    every = [("sizes-async", lambda s, b, r: sizes(s, b, r, "async")),
             ("sizes-sync", lambda s, b, r: sizes(s, b, r, "sync"))]
    every += [(f"partitions-{n}", _partitions(n)) for n in counts]
    every.append(("backlog", backlog))
    if not only:
        return every
    wanted = {name.strip() for name in only.split(",")}
    chosen = [(name, fn) for name, fn in every
              if name in wanted or (name.startswith("partitions-") and "partitions" in wanted)]
    unknown = wanted - {name for name, _ in every} - {"partitions"}
    if unknown:
        raise SystemExit(f"--only: no configuration {', '.join(sorted(unknown))} "
                         f"(this run has {', '.join(name for name, _ in every)})")
    return chosen


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def _per_gb(cpu: float | None, nbytes: int) -> float | None:
    return cpu / (nbytes / 1e9) if cpu is not None and nbytes else None


def sizes(suite, broker: str, run: int, flush: str) -> None:
    if flush == "sync" and suite.external:
        return
    t = suite.start(broker, f"sizes-{flush}", run, flush)
    if flush == "async":
        for size in SIZES:
            topic = f"{t.prefix}s{size}"
            suite.create_topics(t, [topic], 1)
            count = CONSUME_MESSAGES[suite.quick][size]
            produced = produce(suite, t, f"produce/{size}", [topic], 1, size, "1", count)
            profiles = CONSUMER_PROFILES if size == 1024 else ("bench",)
            for profile in profiles:
                workload = f"consume/{size}" + ("" if profile == "bench" else f"/{profile}")
                consume(suite, t, workload, [topic], 1, min(count, produced["delivered"]), size, profile)
        topic = f"{t.prefix}s1024-acks-all"
        suite.create_topics(t, [topic], 1)
        produce(suite, t, "produce/1024/acks=all", [topic], 1, 1024, "all")
    else:
        for acks in ("1", "all"):
            topic = f"{t.prefix}s1024-sync-{acks}"
            suite.create_topics(t, [topic], 1)
            produce(suite, t, "produce/1024/sync" + ("/acks=all" if acks == "all" else ""), [topic], 1, 1024, acks)
    # Right after the throughput phases, on the same broker: the disk may still be writing their
    # data back, as it would be on a broker in use (issue 16 asks for latency measured this way).
    latency(suite, t, flush, LATENCY_RATE, 5 if suite.quick else 15)
    if not suite.quick:
        for rate in (250, 1_000):  # where the latency bends
            latency(suite, t, flush, rate, 6)
    suite.finish(t)


def _partitions(count: int):
    def measure(suite, broker: str, run: int) -> None:
        t = suite.start(broker, f"partitions-{count}", run)
        per_topic = min(count, TOPIC_PARTITION_LIMIT)
        topics = [f"{t.prefix}p{count}-{i}" for i in range(count // per_topic)]
        create_seconds = suite.create_topics(t, topics, per_topic)
        idle = t.proc.wait_idle() if t.proc is not None else 0.0  # Kafka makes the files after answering
        print(f"  {broker:6} created {count:,} partitions in {create_seconds:.1f} s, then idle after "
              f"{idle:.1f} s", flush=True)
        wanted = (PARTITION_MESSAGES_10K if count >= 10_000 else PARTITION_MESSAGES)[suite.quick]
        produced = produce(suite, t, f"produce/1024/p{count}", topics, per_topic, 1024, "1", wanted,
                           create_seconds=create_seconds)
        # A read of 50,000-200,000 records over many partitions lasts 1-3 s: it is timed from assign
        # to the last record. The first read resumes at known positions; the second starts from
        # the beginning, which librdkafka looks up with one ListOffsets request per partition.
        for workload, start in ((f"consume/1024/p{count}", "stored"), (f"consume-earliest/1024/p{count}", "beginning")):
            consume(suite, t, workload, topics, per_topic, min(wanted, produced["delivered"]), 1024,
                    seconds=30 if suite.quick else 60, start=start, timed="assign")
        suite.finish(t)
    return measure


def produce(suite, t: Target, workload: str, topics: list[str], per_topic: int, size: int, acks: str,
            min_messages: int = 0, exactly: int | None = None, **extra) -> dict:
    """Produce for the phase's seconds and at least min_messages, or exactly `exactly` messages."""
    limit = exactly or max(int((3 << 30) / size), min_messages)  # never more than 3 GiB per phase
    spec = {"mode": "produce", "bootstrap": t.bootstrap, "topics": topics, "partitions_per_topic": per_topic,
            "size": size, "acks": acks, "seconds": 300 if exactly else suite.seconds, "max_messages": limit,
            "min_messages": min_messages, "max_seconds": 300 if exactly else 120}
    result, cpu = suite.measured(t, spec)
    suite.record(t, workload, msgs_per_s=result["msgs_per_s"], mb_per_s=result["mb_per_s"],
                 delivered=result["delivered"], seconds=result["seconds"],
                 cpu_s_per_gb=_per_gb(cpu, result["delivered"] * size),
                 broker_busy=cpu / result["seconds"] if cpu is not None else None, **extra)
    print(f"  {t.broker:6} {workload:28} {result['msgs_per_s']:>10,.0f} msg/s", flush=True)
    return result


def consume(suite, t: Target, workload: str, topics: list[str], per_topic: int, expected: int, size: int,
            profile: str = "bench", seconds: float | None = None, start: str = "beginning",
            timed: str = "first") -> dict:
    """Read `expected` messages from the start of every partition with one of loadgen's consumer
    profiles; `start` and `timed` as bench/loadgen.py's consume takes them."""
    seconds = seconds or (10 if suite.quick else 30)
    spec = {"mode": "consume", "bootstrap": t.bootstrap, "topics": topics, "partitions_per_topic": per_topic,
            "expected": expected, "seconds": seconds, "profile": profile, "start": start, "timed": timed,
            "partition_fetch_bytes": max(1_048_576, 4 * size), "group": f"g-{uuid.uuid4().hex[:8]}"}
    result, cpu = suite.measured(t, spec, timeout=seconds + 60)
    extra = {"fetch_pauses": result["fetch_pauses"]} if profile != "bench" else {}
    suite.record(t, workload, msgs_per_s=result["msgs_per_s"], mb_per_s=result["mb_per_s"],
                 received=result["received"], expected=expected, seconds=result["seconds"],
                 seconds_with_connect=result["seconds_with_connect"],
                 cpu_s_per_gb=_per_gb(cpu, result["bytes"]),
                 broker_busy=cpu / result["seconds_with_connect"] if cpu is not None else None, **extra)
    short = f" (read {result['received']:,} of {expected:,})" if result["received"] < expected else ""
    pauses = f", {result['fetch_pauses']} client fetch pauses" if extra else ""
    print(f"  {t.broker:6} {workload:28} {result['msgs_per_s']:>10,.0f} msg/s{pauses}{short}", flush=True)
    return result


def latency(suite, t: Target, flush: str, rate: int, seconds: int) -> None:
    """Stamped 1 KiB messages at a fixed rate (linger 0) to a consumer in another process."""
    count = rate * seconds
    topic = f"{t.prefix}latency-{flush}-{rate}"
    suite.create_topics(t, [topic], 1)
    base = {"bootstrap": t.bootstrap, "topics": [topic], "partitions_per_topic": 1, "size": 1024,
            "count": count, "rate": rate, "acks": "1"}
    consumer = subprocess.Popen([sys.executable, str(LOADGEN), json.dumps(
        {**base, "mode": "latency-consume", "seconds": seconds + 30, "group": f"g-{uuid.uuid4().hex[:8]}"})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        ready = consumer.stdout.readline().strip()  # type: ignore[union-attr]
        if ready != "ready":
            raise RuntimeError(f"latency consumer: {consumer.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        sent, cpu = suite.measured(t, {**base, "mode": "latency-produce"}, timeout=seconds + 60)
        out, _err = consumer.communicate(timeout=seconds + 60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    got = json.loads(out.strip().splitlines()[-1])
    warmup = min(rate // 2, len(got["latency_us"]) // 10)
    lat_ms = np.array(got["latency_us"][warmup:], dtype=np.float64) / 1000
    if not len(lat_ms):
        raise RuntimeError(f"latency at {rate} msg/s: the consumer received nothing")
    p50, p99, p999 = (float(np.percentile(lat_ms, q)) for q in (50, 99, 99.9))
    suite.record(t, f"latency/{flush}/{rate}", p50_ms=p50, p99_ms=p99, p999_ms=p999, max_ms=float(lat_ms.max()),
                 samples=len(lat_ms), sent=sent["sent"], received=got["received"],
                 achieved_rate=sent["achieved_rate"],
                 broker_busy=cpu / sent["seconds"] if cpu is not None else None)
    if rate == LATENCY_RATE:
        suite.results["latency_samples"].append({"broker": t.broker, "run": t.run, "flush": flush, "rate": rate,
                                                 "latency_ms": np.round(lat_ms, 3).tolist()})
    print(f"  {t.broker:6} latency {flush:5} at {rate:5} msg/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
          f"p99.9 {p999:.2f} ms ({len(lat_ms)} samples)", flush=True)


def backlog(suite, broker: str, run: int) -> None:
    """Write a backlog, restart the broker with the page cache dropped, read it back."""
    total = (256 << 20) if suite.quick else (1 << 30)
    size = 1024
    count = total // size
    t = suite.start(broker, "backlog", run, warm_up=False)
    topic = f"{t.prefix}backlog"
    suite.create_topics(t, [topic], 1)
    written = produce(suite, t, "backlog/write", [topic], 1, size, "1", exactly=count)
    cache = "warm (broker not restarted: --bootstrap)"
    if t.proc is not None:
        suite.finish(t, keep_data=True)
        cache = _drop_page_cache()
        # Gregor without its startup CRC check: it reads the whole log through the mapping before
        # the broker listens, so the consumer would read from memory after all. Kafka recovers
        # nothing after a clean shutdown.
        settings = {"commitlog.verify.on.start": "false"} if broker == "gregor" else {}
        proc = suite.new_process(broker, t.proc.data_dir, settings=settings)
        suite.live = proc
        proc.start()
        t = Target(broker, run, "backlog-read", proc, proc.bootstrap, t.prefix)
    consume(suite, t, "backlog/read", [topic], 1, written["delivered"], size, seconds=300)
    suite.results["backlog_cache"] = cache
    suite.finish(t)


def _drop_page_cache() -> str:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        return f"warm (drop_caches refused: {exc.strerror})"
    return "cold (page cache dropped; Gregor without its startup CRC check)"
