"""Profile Gregor's produce and fetch paths with cProfile (bench/profiled_broker.py).

Run: .venv/bin/python bench/run.py --profile [--quick]
One broker is profiled while a confluent-kafka producer writes 1 KiB messages to one
partition, then to 1,000 partitions; another, restarted on the same data, while a consumer
reads everything back; a last one under small requests (1 KiB at 1,000 msg/s, linger 0,
a consumer long-polling). Prints, per path, the functions with the most own CPU time as a
share of the event loop thread's CPU time (epoll waits are left out). cProfile inflates
functions that are called very often, so read the shares as an ordering. Then samples the
produce and fetch paths with py-spy in steady state (bench/sampled_paths.py).
"""

from __future__ import annotations

import json
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import sampled_paths
from broker_process import ROOT, BrokerProcess
from confluent_kafka.admin import AdminClient, NewTopic

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
IDLE = ("poll' of 'select.epoll", "epoll.poll")
KEY_PATHS = ("handle_produce", "handle_fetch", "_answer", "decode_request", "encode_response", "send_all",
             "receive_some", "append", "validate_produce_records", "_read_all", "frame")


def _client(spec: dict) -> dict:
    out = subprocess.run([sys.executable, str(LOADGEN), json.dumps(spec)], check=False, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result()


def _latency(bootstrap: str, rate: int, seconds: float) -> dict:
    base = {"bootstrap": bootstrap, "topics": ["latency"], "partitions_per_topic": 1, "size": 1024,
            "count": int(rate * seconds), "rate": rate}
    consumer = subprocess.Popen([sys.executable, str(LOADGEN), json.dumps({**base, "mode": "latency-consume",
                                 "seconds": seconds + 30})], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        consumer.stdout.readline()  # type: ignore[union-attr]  # "ready"
        sent = _client({**base, "mode": "latency-produce"})
        consumer.communicate(timeout=seconds + 60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    return sent


def _table(prof: Path, title: str, top: int = 22) -> str:
    stats = pstats.Stats(str(prof))
    rows = stats.stats  # type: ignore[attr-defined]
    idle = sum(tt for (file, _, name), (_, _, tt, _, _) in rows.items() if any(i in f"{name}" for i in IDLE))
    total = stats.total_tt  # type: ignore[attr-defined]
    busy = total - idle
    lines = [f"### {title}", "", (f"event loop thread: {busy:.1f} s CPU counted, {total:.1f} s in all (epoll waits "
             f"{idle:.1f} s)"), "", "| own time % of busy | cumulative % | calls | function |", "|---:|---:|---:|---|"]
    ranked = sorted(rows.items(), key=lambda kv: kv[1][2], reverse=True)
    shown = 0
    for (file, line, name), (_, ncalls, tt, ct, _) in ranked:
        if any(i in name for i in IDLE):
            continue
        where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if file != "~" else "builtin"
        lines.append(f"| {tt / busy:.1%} | {ct / busy:.1%} | {ncalls:,} | `{name}` {where} |")
        shown += 1
        if shown == top:
            break
    lines += ["", "Cumulative share of named paths:", ""]
    for (file, line, name), (_, ncalls, tt, ct, _) in sorted(rows.items(), key=lambda kv: -kv[1][3]):
        if name in KEY_PATHS and file != "~":
            lines.append(f"- `{Path(file).parent.name}/{Path(file).name}:{name}`: {ct / busy:.1%} "
                         f"({ncalls:,} calls)")
    return "\n".join(lines) + "\n"


def main(quick: bool = False) -> int:
    seconds = 4 if quick else 10
    tmp = Path(tempfile.mkdtemp(prefix="gregor-profile-"))
    try:
        data = tmp / "data"
        produce_prof, wide_prof, fetch_prof = tmp / "produce.prof", tmp / "wide.prof", tmp / "fetch.prof"
        broker = BrokerProcess(data, profile=produce_prof)
        broker.start()
        broker.wait_idle()
        _topics(broker.bootstrap, ["one"], 1)
        produced = _client({"mode": "produce", "bootstrap": broker.bootstrap, "topics": ["one"],
                            "partitions_per_topic": 1, "size": 1024, "seconds": seconds, "max_messages": 5_000_000})
        broker.stop()
        broker = BrokerProcess(data, profile=wide_prof)
        broker.start()
        _topics(broker.bootstrap, ["wide"], 1_000)
        broker.wait_idle()
        wide = _client({"mode": "produce", "bootstrap": broker.bootstrap, "topics": ["wide"],
                        "partitions_per_topic": 1_000, "size": 1024, "seconds": seconds, "max_messages": 5_000_000})
        broker.stop()
        broker = BrokerProcess(data, profile=fetch_prof)
        broker.start()
        consumed = _client({"mode": "consume", "bootstrap": broker.bootstrap, "topics": ["one"],
                            "partitions_per_topic": 1, "expected": produced["delivered"], "seconds": 120})
        broker.stop()
        latency_prof = tmp / "latency.prof"
        broker = BrokerProcess(tmp / "latency", profile=latency_prof)
        broker.start()
        broker.wait_idle()
        _topics(broker.bootstrap, ["latency"], 1)
        lat = _latency(broker.bootstrap, rate=1_000, seconds=seconds)
        cpu_per_message_us = broker.cpu_seconds() / lat["sent"] * 1e6
        broker.stop()
        print(f"produce 1 partition under cProfile: {produced['msgs_per_s']:,.0f} msg/s; 1,000 partitions: "
              f"{wide['msgs_per_s']:,.0f} msg/s; consume: {consumed['msgs_per_s']:,.0f} msg/s\n")
        print(_table(produce_prof, "Produce path, 1 KiB, 1 partition"))
        print(_table(wide_prof, "Produce path, 1 KiB, 1,000 partitions"))
        print(_table(fetch_prof, "Fetch path, 1 KiB, 1 partition"))
        print(_table(latency_prof, f"Small requests: 1 KiB at {lat['achieved_rate']:,.0f} msg/s, linger 0, one "
                     f"consumer long-polling (whole broker run: {cpu_per_message_us:,.0f} us CPU per message)"))
        print(sampled_paths.main(seconds))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0
