"""A producer without a client library, for throughput cases where a client library is the limit.

At 10,000 partitions librdkafka sends each batch of about one record, and its one thread per
broker connection ("rdk:broker<N>", which builds every batch and request) is busy nearly all
the time at ~75 MB/s on this machine (bench/loadgen.py reports each client thread's CPU): the
case then measures the client. This one builds its requests once and only sends them: each
partition's batch (the same bytes for every partition: `batch_records` records of `size` bytes,
no key, no compression, magic 2, no producer id) is encoded once, requests of up to
`request_bytes` are framed once per group of partitions, and a thread per leader sends them in
turn with up to `in_flight` requests outstanding, patching only the correlation id. The broker
assigns the offsets, so resending the same batch is a new write each time. Responses are read
for their error codes alone (Produce v7's fixed layout, with numpy: kafka-python's decoder
costs more per partition than the broker's own work, and this client shares the 2 CPUs with
the broker). Partitions with an error count as failed, the others as delivered.

Run: .venv/bin/python bench/direct_producer.py '<json spec>'; it prints one JSON line:
{"delivered": records, "failed": records, "failed_by_error": {error name: records}, "seconds",
"msgs_per_s", "mb_per_s", "client_cpu_s", "requests"}. Spec: bootstrap, topics, partitions_per_topic, size, batch_records, acks ("1" or
"all"), seconds, max_bytes, request_bytes (default 1 MiB), in_flight (default 5, librdkafka's
max.in.flight for idempotence, below its default of 1,000,000).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time

import numpy as np
from confluent_kafka.admin import AdminClient
from kafka import errors as Errors
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

VERSION = 7  # responses of a fixed layout per partition (v8 adds per-record errors)
PARTITION_RESPONSE = np.dtype([("index", ">i4"), ("error_code", ">i2"), ("base_offset", ">i8"),
                               ("log_append_time", ">i8"), ("log_start_offset", ">i8")])
CORRELATION_AT = 8  # size (4), api key (2), api version (2), then the correlation id
TIMEOUT_MS = 30_000
CLIENT_ID = "direct-producer"


def build_batch(records: int, size: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    value = b"x" * size
    for i in range(records):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def frame_requests(targets: list[tuple[str, int]], batch: bytes, acks: int,
                   request_bytes: int) -> list[list[bytes | bytearray]]:
    """Produce requests of at most request_bytes of batches (one partition's batch at least),
    framed with correlation id 0, each as the buffers to send. Several partitions per request:
    kafka-python encodes the whole frame. One per request (batches of about request_bytes):
    the frame is a prefix and the shared batch, so 10,000 partitions do not hold 10,000 copies of
    a 1 MiB batch; the prefix is checked against kafka-python's encoding of the first."""
    per_request = max(1, request_bytes // len(batch))
    if per_request == 1:
        frames = [[single_prefix(topic, partition, len(batch), acks), batch] for topic, partition in targets]
        expected = bytes(encode(targets[:1], batch, acks))
        if b"".join(frames[0]) != expected:
            raise AssertionError("a hand-framed Produce request differs from kafka-python's encoding")
        return frames
    return [[encode(targets[i:i + per_request], batch, acks)] for i in range(0, len(targets), per_request)]


def encode(targets: list[tuple[str, int]], batch: bytes, acks: int) -> bytearray:
    data = ProduceRequest.TopicProduceData
    by_topic: dict[str, list[int]] = {}
    for topic, partition in targets:
        by_topic.setdefault(topic, []).append(partition)
    request = ProduceRequest[VERSION](transactional_id=None, acks=acks, timeout_ms=TIMEOUT_MS, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=p, records=batch) for p in parts])
        for topic, parts in by_topic.items()])
    request.with_header(correlation_id=0, client_id=CLIENT_ID)
    return bytearray(request.encode(header=True, framed=True))


def single_prefix(topic: str, partition: int, batch_size: int, acks: int) -> bytearray:
    """Everything of a one-partition Produce v7 frame before its records (written here because
    kafka-python encodes a whole frame, records included: request header v1, then the body:
    null transactional id, acks, timeout, one topic of one partition, the records' length)."""
    client, name = CLIENT_ID.encode(), topic.encode()
    body = (struct.pack(">hhih", 0, VERSION, 0, len(client)) + client
            + struct.pack(">hhii", -1, acks, TIMEOUT_MS, 1) + struct.pack(">h", len(name)) + name
            + struct.pack(">iii", 1, partition, batch_size))
    return bytearray(struct.pack(">i", len(body) + batch_size) + body)


def errors_of(frame: bytes) -> np.ndarray:
    """Every partition's error code in a Produce v7 response (after the response header's
    correlation id)."""
    at = 4
    (topics,) = struct.unpack_from(">i", frame, at)
    at += 4
    codes = []
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", frame, at)
        at += 2 + name_len
        (count,) = struct.unpack_from(">i", frame, at)
        at += 4
        parts = np.frombuffer(frame, PARTITION_RESPONSE, count, at)
        codes.append(parts["error_code"])
        at += count * PARTITION_RESPONSE.itemsize
    return np.concatenate(codes) if codes else np.zeros(0, ">i2")


class Sender(threading.Thread):
    """One leader's connection: sends its requests in turn, up to in_flight outstanding."""

    def __init__(self, address: str, frames: list[list[bytes | bytearray]], batch_records: int, in_flight: int,
                 deadline: float, budget: list[int], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.frames, self.batch_records, self.in_flight = frames, batch_records, in_flight
        self.deadline, self.budget, self.lock = deadline, budget, lock
        self.delivered = self.failed = self.requests = 0
        self.failed_by_code: dict[int, int] = {}  # error code: records
        self.error: str | None = None
        self.buf = bytearray()

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(1 << 20, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _send(self, buffers: list[bytes | bytearray]) -> None:
        views = [memoryview(b) for b in buffers]
        while views:
            sent = self.sock.sendmsg(views)
            while views and sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            if views and sent:
                views[0] = views[0][sent:]

    def _take(self, nbytes: int) -> bool:
        with self.lock:
            if self.budget[0] < nbytes:
                return False
            self.budget[0] -= nbytes
            return True

    def run(self) -> None:
        try:
            outstanding: list[int] = []  # each request's partition count, in order
            correlation = i = 0
            while True:
                sending = time.monotonic() < self.deadline
                while sending and len(outstanding) < self.in_flight:
                    frame = self.frames[i % len(self.frames)]
                    if not self._take(sum(map(len, frame))):
                        sending = False
                        break
                    i += 1
                    correlation += 1
                    struct.pack_into(">i", frame[0], CORRELATION_AT, correlation)
                    self._send(frame)
                    outstanding.append(correlation)
                if not outstanding:
                    return
                (size,) = struct.unpack(">i", self._read(4))
                response = self._read(size)
                (got,) = struct.unpack_from(">i", response, 0)
                if got != outstanding[0]:
                    raise RuntimeError(f"response to {got}, expected {outstanding[0]}")
                outstanding.pop(0)
                codes = errors_of(response)
                bad = int(np.count_nonzero(codes))
                self.failed += bad * self.batch_records
                if bad:
                    for code, n in zip(*np.unique(codes[codes != 0], return_counts=True), strict=True):
                        self.failed_by_code[int(code)] = self.failed_by_code.get(int(code), 0) + int(n) * self.batch_records
                self.delivered += (len(codes) - bad) * self.batch_records
                self.requests += 1
        except (OSError, RuntimeError, struct.error, ValueError) as exc:  # in the result: the parent fails the case
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.sock.close()


def leaders(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    meta = admin.list_topics(timeout=30)
    brokers = {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()}
    return {(t, p.id): brokers[p.leader] for t in topics for p in meta.topics[t].partitions.values()}


def run(spec: dict) -> dict:
    batch = build_batch(spec["batch_records"], spec["size"])
    acks = -1 if spec["acks"] == "all" else int(spec["acks"])
    placement = leaders(spec["bootstrap"], spec["topics"])
    targets = [(t, p) for t in spec["topics"] for p in range(spec["partitions_per_topic"])]
    by_leader: dict[str, list[tuple[str, int]]] = {}
    for target in targets:
        by_leader.setdefault(placement[target], []).append(target)
    cpu0 = time.process_time()
    start = time.perf_counter()
    deadline = time.monotonic() + spec["seconds"]
    budget, lock = [spec["max_bytes"]], threading.Lock()
    senders = [Sender(address, frame_requests(parts, batch, acks, spec.get("request_bytes", 1 << 20)),
                      spec["batch_records"], spec.get("in_flight", 5), deadline, budget, lock)
               for address, parts in sorted(by_leader.items())]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    elapsed = time.perf_counter() - start
    delivered = sum(s.delivered for s in senders)
    errors = [s.error for s in senders if s.error]
    failed_by_error: dict[str, int] = {}
    for sender in senders:
        for code, n in sender.failed_by_code.items():
            name = Errors.for_code(code).__name__
            failed_by_error[name] = failed_by_error.get(name, 0) + n
    return {"delivered": delivered, "failed": sum(s.failed for s in senders), "failed_by_error": failed_by_error,
            "undelivered": 0, "seconds": elapsed,
            "msgs_per_s": delivered / elapsed, "mb_per_s": delivered * spec["size"] / elapsed / 1e6,
            "client_cpu_s": time.process_time() - cpu0, "requests": sum(s.requests for s in senders),
            "errors": errors}


def main() -> None:
    result = run(json.loads(sys.argv[1]))
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(1 if result["errors"] else 0)


if __name__ == "__main__":
    main()
