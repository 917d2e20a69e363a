"""Sample Gregor's produce and fetch paths with py-spy, in steady state: an unmodified broker,
written past its first commitlog segment first (which is resident from the start, so the
cost of faulting segment pages in shows only later). Complements cProfile (profile_paths.py):
no per-call overhead, and time the event loop spends in page faults or syscalls counts.

Called by `bench/run.py --profile`; skipped when py-spy is missing or may not ptrace.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker_process import ROOT, BrokerProcess
from confluent_kafka.admin import AdminClient, NewTopic

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
KEYS = ("handle_produce", "handle_fetch", "CommitLog.append", "FrameDecoder.next_frame", "FrameDecoder.feed",
        "decode_request", "encode_response", "SocketStream.send_all", "SocketStream.receive_some", "_read_all")


def _py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


def _loadgen(spec: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(LOADGEN), json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)


def _record(py_spy: str, pid: int, seconds: float, out: Path) -> bool:
    done = subprocess.run([py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200",
                           "--format", "raw", "--nonblocking", "--output", str(out)],
                          capture_output=True, text=True, timeout=seconds + 30, check=False)
    return done.returncode == 0 and out.exists()


def _table(raw: Path, title: str, top: int = 12) -> str:
    leaf: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = stack.split(";")
        total += n
        leaf[frames[-1]] += n
        for name in {re.sub(r" \(.*", "", f) for f in frames}:
            inclusive[name] += n
    lines = [f"### {title} (py-spy, {total:,} samples of non-idle threads)", "",
             "| own share | frame (file:line) |", "|---:|---|"]
    lines += [f"| {n / total:.1%} | `{frame}` |" for frame, n in leaf.most_common(top)]
    lines += ["", "Inclusive: " + ", ".join(f"`{k}` {inclusive[k] / total:.0%}" for k in KEYS if inclusive[k]), ""]
    return "\n".join(lines)


def main(seconds: float) -> str:
    py_spy = _py_spy()
    if py_spy is None:
        return "py-spy not installed: no sampled profile (pip install py-spy)\n"
    tmp = Path(tempfile.mkdtemp(prefix="gregor-pyspy-"))
    broker = BrokerProcess(tmp / "data")
    try:
        broker.start()
        broker.wait_idle()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 4})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in ("warm-up", "one")]).values():
            future.result()
        base = {"bootstrap": broker.bootstrap, "partitions_per_topic": 1, "size": 1024}
        warm = _loadgen({**base, "mode": "produce", "topics": ["warm-up"], "seconds": 60,
                         "max_messages": (5 << 28) // 1024})
        warm.communicate(timeout=120)
        broker.wait_idle()
        out = []
        producer = _loadgen({**base, "mode": "produce", "topics": ["one"], "seconds": seconds + 3,
                             "max_messages": 20_000_000})
        time.sleep(1.5)
        ok = _record(py_spy, broker.pid, seconds, tmp / "produce.txt")
        produced = json.loads(producer.communicate(timeout=seconds + 90)[0].strip().splitlines()[-1])
        if not ok:
            return "py-spy could not sample the broker (ptrace refused?): no sampled profile\n"
        out.append(_table(tmp / "produce.txt", f"Produce, 1 KiB, 1 partition, past the first segment, "
                                               f"{produced['msgs_per_s']:,.0f} msg/s"))
        consumer = _loadgen({**base, "mode": "consume", "topics": ["one"], "expected": produced["delivered"],
                             "seconds": seconds + 3})
        time.sleep(1.5)
        _record(py_spy, broker.pid, seconds, tmp / "fetch.txt")
        consumed = json.loads(consumer.communicate(timeout=seconds + 90)[0].strip().splitlines()[-1])
        out.append(_table(tmp / "fetch.txt", f"Fetch, 1 KiB, 1 partition, {consumed['msgs_per_s']:,.0f} msg/s"))
        return "\n".join(out)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
