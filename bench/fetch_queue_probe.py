"""What decides a librdkafka consumer's rate over a small backlog: the same N x 1 KiB backlog read
from one partition of Gregor and of a real Kafka 3.9, side by side, with librdkafka's fetch log.

Run: .venv/bin/python bench/fetch_queue_probe.py [--runs 3] [--messages 300000] [--contend N]
Starts one broker of each kind (127.0.0.1, temporary data), writes the backlog to each with the
suite's producer, then reads it once per run and client configuration, the brokers alternating,
each read by a new consumer process (debug=fetch,consumer on its stderr). Prints per read: msg/s
(first message to last), fetch responses with data, messages and bytes per response, the median
fetch round trip (request sent to response queued), how long the fetcher took to queue the first
50,000 messages (its pace against the application's), the deepest local queue at a response, and
the client's fetch pauses (fetch.queue.backoff.ms after its queue passed queued.min.messages or
queued.max.messages.kbytes). --contend N runs N busy-loop processes during every read, to take
CPU from the consumer as other jobs on a shared machine do; they are stopped by their PIDs.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import ROOT, BrokerProcess
from workloads import LOADGEN

CONFIGS = {
    "defaults": {},
    "10 MiB fetches": {"max.partition.fetch.bytes": 10 << 20},
    "10 MiB, fetch.queue.backoff.ms=0": {"max.partition.fetch.bytes": 10 << 20, "fetch.queue.backoff.ms": 0},
    "10 MiB, 1 GiB local queue": {"max.partition.fetch.bytes": 10 << 20, "queued.max.messages.kbytes": 1 << 20,
                                  "queued.min.messages": 10_000_000},
}
SEND = re.compile(r"\|(\d+\.\d+)\|FETCH\|.*Fetch topic \S+ \[0\] at offset")
ENQUEUE = re.compile(r"\|(\d+\.\d+)\|CONSUME\|.*Enqueue (\d+) message\(s\) \((\d+) bytes.*qlen (\d+)")
PAUSE = re.compile(r"Fetch backoff for (\d+)ms: Local: Queue full")
LEAD = 50_000  # messages; ~51 MB, most of the 64 MiB local queue: how fast the fetcher gets ahead


def read(bootstrap: str, topic: str, count: int, conf: dict) -> None:
    """The consumer process: read `count` messages from offset 0, print its rate as JSON."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{time.time_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "debug": "fetch,consumer", **conf})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, first, start = 0, None, time.perf_counter()
    while got < count and time.perf_counter() - start < 60:
        batch = consumer.consume(10_000, 0.2)
        if batch and first is None:
            first = time.perf_counter()
        got += len(batch)
    end = time.perf_counter()
    consumer.close()
    print(json.dumps({"received": got, "msgs_per_s": got / (end - (first or start))}), flush=True)


def fetch_log(stderr: str) -> dict:
    sends = [float(m.group(1)) for m in SEND.finditer(stderr)]
    queued = [(float(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)))
              for m in ENQUEUE.finditer(stderr)]
    rtts = [(q[0] - s) * 1000 for s, q in zip(sends, queued, strict=False)]
    total, lead_ms = 0, float("nan")
    for q in queued:
        total += q[1]
        if total >= LEAD:
            lead_ms = (q[0] - queued[0][0]) * 1000
            break
    return {"responses": len(queued), "lead_ms": lead_ms,
            "msgs_per_response": statistics.median(q[1] for q in queued) if queued else 0,
            "bytes_per_response": statistics.median(q[2] for q in queued) if queued else 0,
            "rtt_ms": statistics.median(rtts) if rtts else float("nan"),
            "deepest_queue": max((q[3] for q in queued), default=0),
            "pauses": sum(1 for m in PAUSE.finditer(stderr) if int(m.group(1)) > 0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--contend", type=int, default=0, help="busy-loop processes during each read")
    parser.add_argument("--read", nargs=4, metavar=("BOOTSTRAP", "TOPIC", "COUNT", "CONF"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        read(args.read[0], args.read[1], int(args.read[2]), json.loads(args.read[3]))
        return 0
    import kafka_process
    from run import create_topics

    tmp = Path(tempfile.mkdtemp(prefix="fetch-queue-probe-"))
    brokers = {"gregor": BrokerProcess(tmp / "gregor"), "kafka": kafka_process.KafkaProcess(tmp / "kafka")}
    try:
        for name, proc in brokers.items():
            proc.start()
            proc.wait_idle()
            create_topics(proc.bootstrap, ["backlog"], 1)
            spec = {"mode": "produce", "bootstrap": proc.bootstrap, "topics": ["backlog"], "partitions_per_topic": 1,
                    "size": 1024, "acks": "1", "seconds": 120, "max_messages": args.messages}
            out = subprocess.run([sys.executable, str(LOADGEN), json.dumps(spec)], capture_output=True, text=True,
                                 check=True, cwd=ROOT)
            print(f"{name}: wrote {json.loads(out.stdout.splitlines()[-1])['delivered']:,} x 1 KiB", flush=True)
            proc.wait_idle()
        print("config | broker | msg/s | responses | msgs/response | bytes/response | fetch rtt ms | "
              f"ms to fetch the first {LEAD:,} | deepest queue | pauses | broker CPU s")
        for label, conf in CONFIGS.items():
            for run in range(args.runs):
                order = list(brokers.items()) if run % 2 == 0 else list(reversed(brokers.items()))
                for name, proc in order:
                    row = _one_read(proc, args.messages, conf, args.contend)
                    print(f"{label} | {name} | {row['msgs_per_s']:,.0f} | {row['responses']} | "
                          f"{row['msgs_per_response']:,.0f} | {row['bytes_per_response']:,.0f} | {row['rtt_ms']:.1f} | "
                          f"{row['lead_ms']:.0f} | "
                          f"{row['deepest_queue']:,} | {row['pauses']} | {row['cpu']:.2f}", flush=True)
    finally:
        for proc in brokers.values():
            proc.discard()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _one_read(proc, count: int, conf: dict, contend: int) -> dict:
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(contend)]
    try:
        before = proc.cpu_seconds()
        out = subprocess.run([sys.executable, __file__, "--read", proc.bootstrap, "backlog", str(count),
                              json.dumps(conf)], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
        cpu = proc.cpu_seconds() - before
    finally:
        for p in busy:
            p.kill()
            p.wait()
    return {**json.loads(out.stdout.splitlines()[-1]), **fetch_log(out.stderr), "cpu": cpu}


if __name__ == "__main__":
    sys.exit(main())
