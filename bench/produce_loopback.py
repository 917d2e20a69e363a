"""The produce path's cost per request over loopback: a `gregor serve` process, fed by
bench/direct_producer.py (prebuilt requests, no client library), read from /proc.

Where bench/produce_probe.py measures the request's own work in process, this one counts
everything a request costs the broker: the kernel's receive and send, framing, the event loop,
the commitlog's writes into the page cache. Per case: the broker's CPU per request
(the whole process, and its event loop thread alone), requests/s and MB/s. The producer shares
the 2 CPUs, so throughput moves with the machine's load more than CPU per request does.

Cases: one partition per request (librdkafka's pattern) with 16 or 1,000 records of 1 KiB, or
16 of 16 KiB; 100 partitions of one 1 KiB record per request (the Java client's and
kafka-python's pattern); acks=1 or all (a single node is a sync-state set of one).
`--source DIR` runs the broker of another checkout (a before/after comparison).

Run: .venv/bin/python bench/produce_loopback.py [--repeat 3] [--seconds 5] [--only NAME,..] [--source DIR]
     [--profile] [--set KEY=VALUE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import profile_paths
from broker_process import ROOT, BrokerProcess, stat_cpu_seconds
from confluent_kafka.admin import AdminClient, NewTopic
from direct_producer import build_batch

DIRECT = Path(__file__).resolve().parent / "direct_producer.py"


@dataclass(frozen=True)
class Case:
    name: str
    partitions: int  # per request
    records: int  # per batch
    size: int
    acks: str = "1"


CASES = [
    Case("one-1k-x16", 1, 16, 1024),
    Case("one-1k-x1000", 1, 1000, 1024),
    Case("one-1k-x16-all", 1, 16, 1024, acks="all"),
    Case("one-16k-x16", 1, 16, 16384),
    Case("wide-100p-1k-x1", 100, 1, 1024),
]


def run_case(case: Case, tmp: Path, seconds: float, profile: Path | None = None) -> dict:
    broker = BrokerProcess(tmp / case.name, profile=profile)
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("probe", case.partitions, 1)]).values():
            future.result()
        broker.wait_idle()
        batch = len(build_batch(case.records, case.size))
        spec = {"bootstrap": broker.bootstrap, "topics": ["probe"], "partitions_per_topic": case.partitions,
                "size": case.size, "batch_records": case.records, "acks": case.acks, "seconds": seconds,
                "max_bytes": 8 << 30, "request_bytes": case.partitions * batch, "in_flight": 5}
        loop = Path(f"/proc/{broker.pid}/task/{broker.pid}/stat")  # trio runs on the main thread
        cpu0, loop0 = broker.cpu_seconds(), stat_cpu_seconds(loop)
        out = subprocess.run([sys.executable, str(DIRECT), json.dumps(spec)], capture_output=True, text=True,
                             timeout=seconds + 120, check=False, cwd=ROOT)
        cpu, loop_cpu = broker.cpu_seconds() - cpu0, stat_cpu_seconds(loop) - loop0
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if result["errors"] or result["failed"]:
            raise RuntimeError(f"{case.name}: {result['errors']} {result['failed_by_error']}")
        requests = result["requests"]
        return {"us_per_request": cpu / requests * 1e6, "loop_us_per_request": loop_cpu / requests * 1e6,
                "requests_per_s": requests / result["seconds"], "mb_per_s": result["mb_per_s"]}
    finally:
        broker.stop()
        shutil.rmtree(tmp / case.name, ignore_errors=True)


def main() -> int:
    return run_cases(__doc__, CASES, run_case, "gregor-produce-loopback-")


def run_cases(doc: str, cases: list, run: Callable, tmp_prefix: str, answer_bytes: bool = False) -> int:
    """The command line of this script and of bench/fetch_loopback.py: each case --repeat times
    (or once under cProfile), one line of ranges per case."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--source", type=Path, default=None, help="the checkout whose broker runs")
    parser.add_argument("--profile", action="store_true",
                        help="run each case once with the broker under cProfile and print its top functions")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for every case (e.g. produce.splice.min.bytes=0); repeatable")
    args = parser.parse_args()
    if args.source is not None:
        BrokerProcess.source = args.source.resolve()
    BrokerProcess.overrides = dict(item.split("=", 1) for item in args.set)
    wanted = {s for s in args.only.split(",") if s}
    tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix))
    try:
        for case in (c for c in cases if not wanted or c.name in wanted):
            if args.profile:
                stats = tmp / f"{case.name}.prof"
                row = run(case, tmp, args.seconds, stats)
                print(f"{case.name} under cProfile: {row['loop_us_per_request']:.0f} us/request on the event loop")
                print(profile_paths._table(stats, case.name, top=30))
                continue
            rows = [run(case, tmp, args.seconds) for _ in range(args.repeat)]

            def span(key: str, fmt: str = ".1f", rows=rows) -> str:
                values = [r[key] for r in rows]
                return f"{min(values):{fmt}}-{max(values):{fmt}}"

            line = (f"{case.name:18s} broker {span('us_per_request')} us/request (event loop "
                    f"{span('loop_us_per_request')}), {span('requests_per_s', ',.0f')} requests/s, "
                    f"{span('mb_per_s', ',.0f')} MB/s")
            if answer_bytes:
                line += f", answers of {span('answer_bytes', ',.0f')} bytes"
            print(line, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
