"""The log cleaner: how fast it compacts, and what it does to produce latency while it runs,
Gregor and Apache Kafka 3.9 in the same run (issue 22).

Each round starts one fresh broker (Gregor: a temporary data dir, default 1 GiB commitlog
segments, async flush; Kafka: tests/kit/kafka.py's single-node KRaft broker with Kafka's defaults),
both with log.cleaner.backoff.ms=1000, everything on 127.0.0.1, and creates with confluent-kafka's
AdminClient a 1-partition topic `compacted` (cleanup.policy=compact, min.cleanable.dirty.ratio=0.01,
segment.bytes=16 MiB: Kafka cleans only rolled segments; Gregor accepts it and has no such
segments, min.compaction.lag.ms=1 day so nothing is cleanable yet) and a 1-partition topic
`probe` (cleanup.policy=delete). bench/loadgen.py's produce mode (acks=1, linger 5 ms, batch.size
1 MB, no compression) writes N records of 1 KiB values to `compacted`, keyed `key-<i mod K>`.
Once the broker is idle, a latency probe
(loadgen's latency-produce/latency-consume, 1,000 messages/s of 1 KiB, linger 0, acks=1) runs for
10 s with nothing to clean: the idle p99. Then AlterConfigs sets min.compaction.lag.ms=0 on
`compacted` and the probe runs 20 s more with nothing else talking to the broker: the p99 while
cleaning counts the messages sent from the alter to one backoff plus the cleaning seconds after
it. The cleaning seconds are each cleaner's own report: Gregor's `gregor_log_cleaner_seconds_total`
(admin API /metrics; its pauses for the event loop included), Kafka's LogCleaner statistics in its
log at INFO ("N MB of log processed in S seconds"). Cleaner throughput = N x 1 KiB / those
seconds. Once the broker is idle again, one full read from the earliest offset says how many
records a consumer now gets.

Rewrites the "Log compaction (issue 22)" section of docs/benchmarks.md.

Run: .venv/bin/python bench/compaction_bench.py [--quick] [--repeat N] [--records N] [--keys K]
                                                [--gregor-only] [--no-docs] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import ROOT, BrokerProcess
from docs_section import replace_section
from figures import spread

SECTION = ("<!-- compaction:start -->", "<!-- compaction:end -->")
SETTINGS = {"log.cleaner.backoff.ms": "1000"}
PROBE_RATE = 1000
PROBE_S = 10.0
CLEANING_PROBE_S = 20.0  # longer than either broker's cleaning
BACKOFF_S = 1.0  # log.cleaner.backoff.ms
VALUE = 1024
COMPACTED = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": str(16 << 20),
             "min.compaction.lag.ms": str(86_400_000)}


def _client(spec: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "bench" / "loadgen.py"), json.dumps(spec)],
                            stdout=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def _create(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("compacted", 1, 1, config=COMPACTED), NewTopic("probe", 1, 1)])
    for f in futures.values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=10).topics
        if all(t in topics and all(p.leader >= 0 for p in topics[t].partitions.values())
               for t in ("compacted", "probe")):
            return
        time.sleep(0.2)
    raise RuntimeError("topics have no leader after 30 s")


def _enable_cleaning(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", "compacted", incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def _count(bootstrap: str) -> int:
    """Records a consumer reads from the earliest offset to the end offset seen first."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
    tp = TopicPartition("compacted", 0, OFFSET_BEGINNING)
    _, end = consumer.get_watermark_offsets(tp, timeout=10)
    consumer.assign([tp])
    count = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        batch = consumer.consume(10_000, 0.5)
        if not batch:
            if consumer.position([tp])[0].offset >= end:
                break
            continue
        count += sum(1 for m in batch if m.error() is None)
        if batch[-1].offset() >= end - 1:
            break
    consumer.close()
    return count


def _probe(bootstrap: str, seconds: float) -> tuple[subprocess.Popen, subprocess.Popen]:
    count = int(PROBE_RATE * seconds)
    base = {"bootstrap": bootstrap, "topics": ["probe"], "partitions_per_topic": 1, "size": VALUE, "acks": "1"}
    consumer = _client({**base, "mode": "latency-consume", "count": count, "seconds": seconds + 60,
                        "profile": "bench", "with_stamps": True})
    assert consumer.stdout is not None and consumer.stdout.readline().strip() == "ready"
    producer = _client({**base, "mode": "latency-produce", "count": count, "rate": PROBE_RATE})
    return producer, consumer


def _p99(latencies_us: list[int]) -> float:
    return float(np.percentile(np.array(latencies_us), 99)) / 1000 if latencies_us else float("nan")


def _gregor_cleaner(proc: BrokerProcess) -> tuple[float, int]:
    """(seconds, records removed) the log cleaner reports on /metrics."""
    with urllib.request.urlopen(f"http://{proc.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line.startswith("gregor_log_cleaner_")}
    return values["gregor_log_cleaner_seconds_total"], int(values["gregor_log_cleaner_records_removed_total"])


KAFKA_CLEANED = re.compile(r"([\d.,]+) MB of log processed in ([\d.,]+) seconds")


def _kafka_cleaner(proc) -> float:
    """Seconds Kafka's LogCleaner reports for its passes over `compacted` (its INFO stats)."""
    text = proc.kafka.log_path.read_text(errors="replace")
    return sum(float(m.group(2).replace(",", "")) for m in KAFKA_CLEANED.finditer(text))


def one_round(broker: str, tmp: Path, records: int, keys: int) -> dict:
    if broker == "kafka":
        import kafka_process
        proc = kafka_process.KafkaProcess(tmp / "kafka", dict(SETTINGS))
        proc.kafka.log_level = "INFO"  # the LogCleaner's own statistics
    else:
        proc = BrokerProcess(tmp / "gregor", dict(SETTINGS), admin_api=True)
    proc.start()
    try:
        proc.wait_idle()
        _create(proc.bootstrap)
        produced = _result(_client({"mode": "produce", "bootstrap": proc.bootstrap, "topics": ["compacted"],
                                    "partitions_per_topic": 1, "size": VALUE, "acks": "1", "seconds": 600,
                                    "max_messages": records, "key_space": keys}), timeout=900)
        assert produced["delivered"] == records, produced
        proc.wait_idle()
        producer, consumer = _probe(proc.bootstrap, PROBE_S)
        _result(producer)
        idle = _result(consumer)
        producer, consumer = _probe(proc.bootstrap, CLEANING_PROBE_S)
        began_ns = time.monotonic_ns()
        _enable_cleaning(proc.bootstrap)
        _result(producer)  # nothing else talks to the broker meanwhile: the probe sees the cleaner alone
        during = _result(consumer)
        proc.wait_idle()
        count = _count(proc.bootstrap)
        if broker == "kafka":
            seconds = _kafka_cleaner(proc)
        else:
            seconds = _gregor_cleaner(proc)[0]
        # the cleaner starts within one backoff of the alter
        ended_ns = began_ns + int((BACKOFF_S + seconds) * 1e9)
        window = [lat for lat, sent in zip(during["latency_us"], during["sent_ns"]) if began_ns <= sent <= ended_ns]
        return {"broker": broker, "records": records, "keys": keys, "clean_seconds": seconds,
                "mb_per_s": records * VALUE / seconds / 1e6 if seconds else float("nan"), "records_after": count,
                "produce_mb_per_s": produced["mb_per_s"], "p99_idle_ms": _p99(idle["latency_us"]),
                "p99_cleaning_ms": _p99(window), "probe_samples_cleaning": len(window),
                "cpu_seconds": proc.cpu_seconds()}
    finally:
        proc.discard()
        shutil.rmtree(tmp, ignore_errors=True)


def _fmt(values: list[float], digits: int = 1) -> str:
    s = spread(values)
    if s is None:
        return "—"
    return f"{s.median:.{digits}f} ({s.low:.{digits}f}–{s.high:.{digits}f})"


def report(results: list[dict], args: argparse.Namespace) -> str:
    brokers = [b for b in ("gregor", "kafka") if any(r["broker"] == b for r in results)]
    lines = [
        (f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, {len(results) // len(brokers)} rounds "
        f"per broker (median, with the lowest and highest round), {args.records:,} records of 1 KiB over "
        f"{args.keys:,} keys, `bench/compaction_bench.py{' --quick' if args.quick else ''} --repeat {args.repeat}`. "
        "Cleaning seconds are each cleaner's own: Gregor's `gregor_log_cleaner_seconds_total` (its pauses "
        "for the event loop included), Kafka's LogCleaner statistics (`MB of log processed in S seconds`); "
        "cleaned MB/s is the records' bytes over them. The p99 is the latency of a 1,000 msg/s probe "
        "(1 KiB, acks=1) to another topic: with nothing to clean, and from the AlterConfigs that makes the "
        "records cleanable to one backoff (1 s) plus the cleaning seconds after it, with nothing else "
        "talking to the broker. Records after: what one full read from the earliest offset returns once "
        "the broker is idle again."),
        "",
        ("| broker | cleaning s | cleaned MB/s | records a reader sees after | produce p99 idle ms | "
        "produce p99 while cleaning ms |"),
        "|---|---:|---:|---:|---:|---:|",
    ]
    for b in brokers:
        rs = [r for r in results if r["broker"] == b]
        name = "Gregor" if b == "gregor" else "Kafka 3.9.0"
        lines.append(f"| {name} | {_fmt([r['clean_seconds'] for r in rs])} | {_fmt([r['mb_per_s'] for r in rs])} | "
                     f"{_fmt([r['records_after'] for r in rs], 0)} | {_fmt([r['p99_idle_ms'] for r in rs], 2)} | "
                     f"{_fmt([r['p99_cleaning_ms'] for r in rs], 2)} |")
    if len(brokers) == 2:
        g = statistics.median(r["mb_per_s"] for r in results if r["broker"] == "gregor")
        k = statistics.median(r["mb_per_s"] for r in results if r["broker"] == "kafka")
        lines += ["", f"Cleaned MB/s, Gregor / Kafka (medians): {g / k:.2f}x."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="65,536 records instead of 262,144")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=0)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.records = args.records or (65_536 if args.quick else 262_144)
    brokers = ["gregor"]
    if not args.gregor_only:
        import kafka_process
        why = kafka_process.unavailable()
        if why:
            print(f"Kafka unavailable ({why}): Gregor only", file=sys.stderr)
        else:
            brokers.append("kafka")
    results = []
    for run in range(args.repeat):
        for broker in brokers if run % 2 == 0 else brokers[::-1]:
            tmp = Path(tempfile.mkdtemp(prefix=f"gregor-compaction-{broker}-"))
            r = one_round(broker, tmp, args.records, args.keys)
            r["run"] = run
            results.append(r)
            print(json.dumps(r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    text = report(results, args)
    print(text)
    if not args.no_docs:
        replace_section(ROOT / "docs" / "benchmarks.md", *SECTION,
                        "## Log compaction (issue 22)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
