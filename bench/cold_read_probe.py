"""A cold backlog read and the event loop: ApiVersions round trips on one connection while a
consumer reads a backlog that is not in the page cache, and the read rate.

Run: .venv/bin/python bench/cold_read_probe.py [SOURCE_TREE] [--mib N]   (default: this checkout, 512)
Starts a broker from SOURCE_TREE (for before/after, a `git archive` of an older commit), writes
N MiB of 1 KiB messages to one partition, restarts it with the page cache dropped (needs root;
otherwise it says the read was warm) and commitlog.verify.on.start=false, then reads everything from offset 0 with confluent-kafka
while another connection sends ApiVersions every 2 ms. Prints the read rate and the round trips.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench")); sys.path.insert(0, str(ROOT))
from broker_process import BrokerProcess
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.metadata import ApiVersionsRequest

from tests.kit.wire import WireClient

parser = argparse.ArgumentParser()
parser.add_argument("source", nargs="?", default=str(ROOT))
parser.add_argument("--mib", type=int, default=512)
args = parser.parse_args()
BrokerProcess.source = Path(args.source).resolve()
tmp = Path(tempfile.mkdtemp(prefix="gregor-cold-probe-"))
# No CRC check of the log at start: it would read the whole backlog into memory before the
# broker listens, and the read would not be cold.
settings = {"commitlog.segment.bytes": str(256 << 20), "commitlog.verify.on.start": "false"}
b = BrokerProcess(tmp / "data", settings)
b.start(); b.wait_idle()
count = args.mib << 10
try:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": "1"})
    value = b"v" * 1024
    for _ in range(count):
        while True:
            try:
                p.produce("backlog", value); break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    b.stop()
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n"); cache = "cold"
    except OSError:
        cache = "warm (drop_caches refused)"
    b = BrokerProcess(tmp / "data", settings)
    b.start(); b.wait_idle()
    stop = threading.Event(); trips = []
    def ping():
        c = WireClient(b.bootstrap)
        while not stop.is_set():
            t = time.perf_counter()
            c.request(ApiVersionsRequest[3](client_software_name="p", client_software_version="1"))
            trips.append(time.perf_counter() - t)
            time.sleep(0.002)
    th = threading.Thread(target=ping); th.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "probe", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 0})
    c.assign([TopicPartition("backlog", 0, 0)])
    got = 0; t = time.perf_counter(); deadline = t + 300
    while got < count and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(10000, 1.0) if not m.error())
    took = time.perf_counter() - t
    c.close(); stop.set(); th.join()
    trips.sort()
    ms = [x * 1000 for x in trips]
    print(f"{args.source}: {cache} read of {got * 1024 / 2**20:.0f} MiB: {got * 1024 / took / 1e6:.0f} MB/s; "
          f"ApiVersions round trips meanwhile ({len(ms)}): p50 {statistics.median(ms):.2f} ms, "
          f"p99 {ms[int(len(ms) * 0.99)]:.1f} ms, max {ms[-1]:.1f} ms")
finally:
    b.stop()
    shutil.rmtree(tmp, ignore_errors=True)
