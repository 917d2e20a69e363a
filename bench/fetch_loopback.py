"""The fetch path's cost per request over loopback: a `gregor serve` process answering prebuilt
Fetch requests (no client library), its CPU read from /proc; the fetch counterpart of
bench/produce_loopback.py.

Each case writes its partitions first (batches of 1 KiB records, bench/direct_producer.py's
batch), then one client thread sends the same sessionless Fetch v12 request over and over, up
to 5 outstanding, patching only the correlation id, and reads each answer's bytes without
decoding them. Per case: the broker's CPU per request (the whole process, and its event loop
thread alone), requests/s and MB/s of answers. The client shares the 2 CPUs, so throughput moves
with the machine's load more than CPU per request does.

Cases: one partition per request answering one batch of 16 x 1 KiB (librdkafka's pattern, a
consumer that keeps up) or 1 MiB of such batches (a consumer reading a backlog); 100 partitions of
one 1 KiB record each per request (the Java client's and kafka-python's pattern).
`--source DIR` runs the broker of another checkout (a before/after comparison).

Run: .venv/bin/python bench/fetch_loopback.py [--repeat 3] [--seconds 5] [--only NAME,..] [--source DIR]
     [--profile]
"""

from __future__ import annotations

import shutil
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import produce_loopback
from broker_process import BrokerProcess, stat_cpu_seconds
from confluent_kafka.admin import AdminClient, NewTopic
from direct_producer import CORRELATION_AT, build_batch, encode
from kafka.protocol.consumer import FetchRequest

IN_FLIGHT = 5


@dataclass(frozen=True)
class Case:
    name: str
    partitions: int  # per request
    records: int  # per batch
    batches: int  # written to each partition
    partition_bytes: int  # partition_max_bytes of the Fetch


CASES = [
    Case("one-1k-x16", 1, 16, 1, 1 << 20),
    Case("one-1MiB", 1, 16, 64, 1 << 20),
    Case("wide-100p-1k-x1", 100, 1, 1, 1 << 20),
]


class Connection:
    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.buf = bytearray()

    def frame(self) -> bytes:
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack_from(">i", self.buf)[0]:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk
        (size,) = struct.unpack_from(">i", self.buf)
        out = bytes(self.buf[4:4 + size])
        del self.buf[:4 + size]
        return out


def fetch_request(partitions: int, partition_bytes: int) -> bytearray:
    F = FetchRequest.FetchTopic
    request = FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[F(topic="probe", partitions=[
            F.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=partition_bytes)
            for p in range(partitions)])], forgotten_topics_data=[], rack_id="")
    request.with_header(correlation_id=0, client_id="fetch-loopback")
    return bytearray(request.encode(header=True, framed=True))


def write_data(conn: Connection, case: Case) -> None:
    batch = build_batch(case.records, 1024)
    request = encode([("probe", p) for p in range(case.partitions)], batch, 1)
    for _ in range(case.batches):
        conn.sock.sendall(request)
        conn.frame()


def run_case(case: Case, tmp: Path, seconds: float, profile: Path | None = None) -> dict:
    broker = BrokerProcess(tmp / case.name, profile=profile)
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
        for future in admin.create_topics([NewTopic("probe", case.partitions, 1)]).values():
            future.result()
        conn = Connection(broker.bootstrap)
        write_data(conn, case)
        broker.wait_idle()
        request = fetch_request(case.partitions, case.partition_bytes)
        loop = Path(f"/proc/{broker.pid}/task/{broker.pid}/stat")  # trio runs on the main thread
        cpu0, loop0 = broker.cpu_seconds(), stat_cpu_seconds(loop)
        start = time.perf_counter()
        deadline = start + seconds
        outstanding = requests = answered_bytes = correlation = 0
        while True:
            while outstanding < IN_FLIGHT and time.perf_counter() < deadline:
                correlation += 1
                struct.pack_into(">i", request, CORRELATION_AT, correlation)
                conn.sock.sendall(request)
                outstanding += 1
            if not outstanding:
                break
            answer = conn.frame()
            outstanding -= 1
            requests += 1
            answered_bytes += len(answer)
        elapsed = time.perf_counter() - start
        cpu, loop_cpu = broker.cpu_seconds() - cpu0, stat_cpu_seconds(loop) - loop0
        if answered_bytes < requests * case.partitions * 1024:
            raise RuntimeError(f"{case.name}: answers of {answered_bytes / requests:.0f} bytes hold no records")
        conn.sock.close()
        return {"us_per_request": cpu / requests * 1e6, "loop_us_per_request": loop_cpu / requests * 1e6,
                "requests_per_s": requests / elapsed, "mb_per_s": answered_bytes / elapsed / 1e6,
                "answer_bytes": answered_bytes / requests}
    finally:
        broker.stop()
        shutil.rmtree(tmp / case.name, ignore_errors=True)


def main() -> int:
    return produce_loopback.run_cases(__doc__, CASES, run_case, "gregor-fetch-loopback-", answer_bytes=True)


if __name__ == "__main__":
    sys.exit(main())
