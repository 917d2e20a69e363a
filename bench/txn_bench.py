"""Transactional produce throughput at 1, 10, 100 and 1,000 records per transaction against the
same producer without transactions (idempotent, acks=all: what a transactional producer is
besides its transactions), Gregor and Apache Kafka 3.9 in the same run (issue 19).

Each round starts one fresh broker per kind (defaults; Gregor: async flush) with one 1-partition
topic per case. A child process (confluent-kafka, linger 5 ms, 1 KiB values, no compression)
produces for at most `--seconds` or `--records` records per case: `begin_transaction`, K records,
`commit_transaction`, again; the baseline sends the same records with no transactions. Figures
are records per second; the goal is ≥ 80% of the baseline at 1,000 records per transaction.

Rewrites the "Transactions (issue 19)" section of docs/benchmarks.md.

Run: .venv/bin/python bench/txn_bench.py [--repeat N] [--records N] [--seconds S] [--gregor-only] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from both_brokers import compared, started
from broker_process import ROOT
from docs_section import replace_section
from figures import spread

SECTION = ("<!-- transactions:start -->", "<!-- transactions:end -->")
CASES = [0, 1, 10, 100, 1000]  # records per transaction; 0: no transactions (the baseline)
VALUE = 1024

CHILD = r"""
import json, sys, time
from confluent_kafka import Producer
spec = json.loads(sys.argv[1])
per_txn, bootstrap, topic = spec["per_txn"], spec["bootstrap"], spec["topic"]
config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1048576, "enable.idempotence": True,
          "acks": "all", "queue.buffering.max.messages": 1000000}
if per_txn:
    config["transactional.id"] = "bench-" + topic
producer = Producer(config)
value = b"x" * spec["size"]
if per_txn:
    producer.init_transactions(60)
sent, started = 0, time.perf_counter()
deadline = started + spec["seconds"]
while sent < spec["records"] and time.perf_counter() < deadline:
    step = per_txn or 1000
    if per_txn:
        producer.begin_transaction()
    for _ in range(step):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    producer.poll(0)
    if per_txn:
        producer.commit_transaction(60)
    sent += step
producer.flush(60)
elapsed = time.perf_counter() - started
print(json.dumps({"records": sent, "seconds": elapsed, "records_per_s": sent / elapsed}))
"""


def _produce(bootstrap: str, topic: str, per_txn: int, records: int, seconds: float) -> dict:
    spec = {"bootstrap": bootstrap, "topic": topic, "per_txn": per_txn, "records": records, "seconds": seconds,
            "size": VALUE}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True,
                          timeout=seconds + 180, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def one_round(broker: str, tmp: Path, records: int, seconds: float, order: list[int]) -> list[dict]:
    out = []
    with started(broker, tmp, {}) as listeners:
        bootstrap = listeners["PLAINTEXT"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(f"txn-{k}", 1, 1) for k in [*order, "warm-up"]]).values():
            f.result(30)
        time.sleep(1)
        _produce(bootstrap, "txn-warm-up", 100, min(records, 20_000), seconds)  # JIT, page cache, first segment
        for k in order:
            result = _produce(bootstrap, f"txn-{k}", k, records, seconds)
            out.append({"broker": broker, "per_txn": k, **result})
            print(json.dumps(out[-1]), flush=True)
    return out


def report(results: list[dict], args: argparse.Namespace) -> str:
    brokers = [b for b in ("gregor", "kafka") if any(r["broker"] == b for r in results)]
    rounds = len(results) // (len(CASES) * len(brokers))
    lines = [(f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, {rounds} rounds per broker "
              f"(median, with the lowest and highest round), up to {args.records:,} records of 1 KiB or "
              f"{args.seconds:.0f} s per case, `bench/txn_bench.py --repeat {args.repeat}`: a confluent-kafka "
              "producer (idempotent, acks=all, linger 5 ms) to a 1-partition topic, with K records per "
              "transaction or none."), "",
             "| broker | records per transaction | records/s | of no transactions |", "|---|---:|---:|---:|"]
    for b in brokers:
        base = statistics.median(r["records_per_s"] for r in results if r["broker"] == b and r["per_txn"] == 0)
        for k in CASES:
            s = spread(r["records_per_s"] for r in results if r["broker"] == b and r["per_txn"] == k)
            label = "none" if k == 0 else f"{k:,}"
            lines.append(f"| {'Gregor' if b == 'gregor' else 'Kafka 3.9.0'} | {label} | {s.median:,.0f} "
                         f"({s.low:,.0f}–{s.high:,.0f}) | {s.median / base:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    brokers = compared(args.gregor_only)
    results = []
    for run in range(args.repeat):
        order = CASES if run % 2 == 0 else CASES[::-1]
        for broker in brokers:
            tmp = Path(tempfile.mkdtemp(prefix=f"gregor-txn-{broker}-"))
            try:
                results += one_round(broker, tmp, args.records, args.seconds, order)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    text = report(results, args)
    print(text)
    if not args.no_docs:
        replace_section(ROOT / "docs" / "benchmarks.md", *SECTION, "## Transactions (issue 19)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
