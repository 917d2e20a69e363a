"""Load generators for bench/run.py, one per process so that the client never shares a
Python interpreter with another client (librdkafka's own threads still share the 2 CPUs
with the broker).

Run: .venv/bin/python bench/loadgen.py '<json spec>'
The spec's "mode" is produce, consume, latency-produce or latency-consume. The process
prints "ready" once it is connected (latency-consume only) and then one JSON line with its
result. Every loop is bounded by a message count and by a deadline.

Consumers come in three profiles (spec "profile"): "bench", the suite's own settings (below);
"defaults", librdkafka's defaults; "large-fetch", the defaults with 10 MiB per partition and fetch.
The last two count the client's own fetch pauses (see _FetchPauses).
"""

from __future__ import annotations

import json
import logging
import re
import struct
import sys
import time
from pathlib import Path

import numpy as np
from broker_process import stat_cpu_seconds
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

STAMP = struct.Struct("<q")  # latency payloads start with time.monotonic_ns() at send


def _targets(spec: dict) -> list[tuple[str, int]]:
    return [(topic, p) for topic in spec["topics"] for p in range(spec["partitions_per_topic"])]


def _producer(spec: dict, linger_ms: float) -> Producer:
    return Producer({
        "bootstrap.servers": spec["bootstrap"],
        "acks": spec.get("acks", "1"),
        "linger.ms": linger_ms,
        "batch.size": 1_000_000,
        "message.max.bytes": 1_048_576,
        "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.kbytes": 131_072,  # at most ~1 s of 1 KiB data left to flush
        "queue.buffering.max.messages": 500_000,
        "delivery.report.only.error": True,
        "on_delivery": _count_failure,
        **spec.get("client", {}),  # security settings (bench/security_bench.py): SASL_SSL, CA file
    })


_failures = 0


def _count_failure(err, _msg) -> None:
    global _failures
    if err is not None:
        _failures += 1


def produce(spec: dict) -> dict:
    """Produce fixed-size values round-robin over the partitions until the count or the deadline.
    With "keys": true each record has a key, the message counter in ASCII decimal (b"0", b"1", ...);
    without it (the default) records have no key."""
    producer = _producer(spec, spec.get("linger_ms", 5))
    keyed = bool(spec.get("keys", False))
    key_space = spec.get("key_space")  # keys repeat: the counter modulo this (a compacted topic's updates)
    targets = _targets(spec)
    n_targets = len(targets)
    value = b"x" * spec["size"]
    limit = spec["max_messages"]
    least = spec.get("min_messages", 0)  # a consume phase reads this many back, on every broker alike
    send = producer.produce
    poll = producer.poll
    sent = 0
    start = time.perf_counter()
    deadline = start + spec["seconds"]
    last_chance = start + spec.get("max_seconds", 120)
    while sent < limit:
        topic, partition = targets[sent % n_targets]
        try:
            if key_space:
                send(topic, value, b"key-%d" % (sent % key_space), partition=partition)
            elif keyed:
                send(topic, value, b"%d" % sent, partition=partition)
            else:
                send(topic, value, partition=partition)
        except BufferError:
            poll(0.002)
            continue
        sent += 1
        if sent & 1023 == 0:
            poll(0)
            now = time.perf_counter()
            if (now > deadline and sent >= least) or now > last_chance:
                break
    left = producer.flush(spec.get("flush_timeout", 60))
    elapsed = time.perf_counter() - start
    delivered = sent - left - _failures
    threads = thread_cpu()  # before the producer's threads end with it
    return {"sent": sent, "delivered": delivered, "failed": _failures, "undelivered": left,
            "seconds": elapsed, "msgs_per_s": delivered / elapsed,
            "mb_per_s": delivered * spec["size"] / elapsed / 1e6,
            "client_cpu_s": sum(threads.values()), "busiest_thread": max(threads.items(), key=lambda kv: kv[1])}


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each of this process's threads so far, by thread name and
    id: the Python thread that calls produce() is "MainThread"-like ("python"), librdkafka's are
    "rdk:main", "rdk:broker1", ... One thread at its elapsed time is a client at its limit
    (librdkafka sends to each broker from one thread)."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            out[f"{(task / 'comm').read_text().strip()}/{task.name}"] = stat_cpu_seconds(task / "stat")
        except OSError:  # the thread ended meanwhile
            continue
    return out


LARGE_FETCH = 10 << 20


class _FetchPauses(logging.Handler):
    """Counts librdkafka's fetch pauses: with more than queued.max.messages.kbytes (64 MiB) or
    queued.min.messages (100,000) in its local queue, the client stops fetching the partition for
    fetch.queue.backoff.ms (1,000 ms), however soon the application drains the queue."""

    PAUSE = re.compile(r"Fetch backoff for (\d+)ms: Local: Queue full")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        found = self.PAUSE.search(record.getMessage())
        if found and int(found.group(1)) > 0:
            self.count += 1


def _consumer(spec: dict, pauses: _FetchPauses | None = None) -> Consumer:
    common = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec.get("group", "gregor-bench"),
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }
    profile = spec.get("profile", "bench")
    if profile != "bench":
        logger = logging.getLogger(f"rdkafka-{profile}")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        if pauses is not None:
            logger.addHandler(pauses)
        common.update({"debug": "fetch", "logger": logger})
        if profile == "large-fetch":
            common["max.partition.fetch.bytes"] = LARGE_FETCH
        return Consumer(common)
    return Consumer({
        **common,
        **spec.get("client", {}),
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": spec.get("partition_fetch_bytes", 1_048_576),
        "queued.max.messages.kbytes": 262_144,
        # librdkafka (2.x) stops fetching a partition for fetch.queue.backoff.ms, 1,000 ms by
        # default, whenever its local queue holds more than queued.min.messages: the client then
        # sits idle while the broker has data. With the default, consume 1 KiB from one Gregor
        # measured anywhere from 181k to 469k msg/s between runs with the broker ~7% busy;
        # with 0 it measured 720k-780k. The suite measures the broker, so the throttle is off.
        "fetch.queue.backoff.ms": 0,
    })


def consume(spec: dict) -> dict:
    """Read `expected` messages from the start of every partition.

    spec "start": "beginning" (the default) assigns OFFSET_BEGINNING, and librdkafka looks up each
    partition's start with a ListOffsets request of its own; "stored" assigns offset 0 (the
    topics are new), as a group resuming from committed offsets or Spark's Kafka source assigns
    known positions. spec "timed": "first" (the default) rates from the first record to the last;
    "assign" connects first (a Metadata request) and rates from assign to the last record: what
    the application waits for, with no clock started by whichever partial answer comes first."""
    pauses = _FetchPauses()
    consumer = _consumer(spec, pauses)
    from_assign = spec.get("timed", "first") == "assign"
    if from_assign:
        consumer.list_topics(timeout=30)
    offset = 0 if spec.get("start", "beginning") == "stored" else OFFSET_BEGINNING
    start = time.perf_counter()
    consumer.assign([TopicPartition(t, p, offset) for t, p in _targets(spec)])
    expected = spec["expected"]
    got = errors = 0
    nbytes = 0
    first = None
    deadline = start + spec["seconds"]
    while got < expected and time.perf_counter() < deadline:
        batch = consumer.consume(10_000, 0.2)
        if not batch:
            continue
        if first is None:
            first = time.perf_counter()
        for m in batch:
            if m.error() is not None:
                errors += 1
            else:
                got += 1
                nbytes += len(m)
    end = time.perf_counter()
    # Logs reach the logger in order with the messages, during consume(): a pause that began once
    # this read's last messages were queued (it did not slow the read) is mostly not counted.
    paused = pauses.count
    consumer.close()
    span = end - (start if from_assign else first or start)
    return {"received": got, "errors": errors, "bytes": nbytes, "seconds": span,
            "seconds_with_connect": end - start, "fetch_pauses": paused, "msgs_per_s": got / span if span else 0.0,
            "mb_per_s": nbytes / span / 1e6 if span else 0.0}


def latency_produce(spec: dict) -> dict:
    """Send `count` stamped messages at a fixed rate, linger 0."""
    producer = _producer(spec, 0)
    pad = b"x" * (spec["size"] - STAMP.size)
    rate, count = spec["rate"], spec["count"]
    topic = spec["topics"][0]
    start = time.perf_counter()
    for i in range(count):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        producer.produce(topic, STAMP.pack(time.monotonic_ns()) + pad, partition=0)
        producer.poll(0)
    left = producer.flush(30)
    elapsed = time.perf_counter() - start
    return {"sent": count, "undelivered": left, "failed": _failures, "seconds": elapsed,
            "achieved_rate": count / elapsed}


def latency_consume(spec: dict) -> dict:
    """Receive stamped messages and record now - stamp, in microseconds."""
    consumer = _consumer(spec)
    consumer.assign([TopicPartition(spec["topics"][0], 0, OFFSET_BEGINNING)])
    warm_until = time.perf_counter() + 1.0
    while time.perf_counter() < warm_until:
        consumer.poll(0.1)
    print("ready", flush=True)
    count = spec["count"]
    samples = np.empty(count, dtype=np.int64)
    sent_ns = np.empty(count, dtype=np.int64)  # each sample's send stamp (CLOCK_MONOTONIC, system-wide)
    got = 0
    deadline = time.perf_counter() + spec["seconds"]
    while got < count and time.perf_counter() < deadline:
        m = consumer.poll(0.05)
        if m is None or m.error() is not None:
            continue
        sent_ns[got] = STAMP.unpack_from(m.value())[0]
        samples[got] = time.monotonic_ns() - sent_ns[got]
        got += 1
    consumer.close()
    out = {"received": got, "latency_us": (samples[:got] // 1000).tolist()}
    if spec.get("with_stamps"):
        out["sent_ns"] = sent_ns[:got].tolist()
    return out


MODES = {"produce": produce, "consume": consume,
         "latency-produce": latency_produce, "latency-consume": latency_consume}


def main() -> None:
    spec = json.loads(sys.argv[1])
    result = MODES[spec["mode"]](spec)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
