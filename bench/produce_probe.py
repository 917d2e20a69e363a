"""The produce path's cost per request, in process: a broker with a real store, no socket.

Prebuilt Produce frames (v9, as librdkafka 2.x sends them; several shapes, below) are fed to
the connection loop's own steps one after another: FrameDecoder.feed / next_frame, then
`_answer` (decode, dispatch, check, append, encode), on one trio run; time per request is the
event loop thread's CPU time divided by the requests. No client shares the CPU, so the figure
moves little between runs, unlike a loopback benchmark on 2 cores. `--profile` prints cProfile's
top functions per shape instead (cProfile inflates often-called functions: read as an order).

Shapes: `one` (one partition per request, librdkafka's pattern), `wide` (many partitions per
request, the Java client's and kafka-python's), each with 1 KiB or 16 KiB records, acks=1 or
acks=all (on a single node the sync-state set is the node itself), idempotent or not.

`--stages` times each step of a request alone instead (framing, decode, checks, append, answer).
`--socket` feeds the frames through the whole connection loop over a socket pair instead, a
client task in the same trio run keeping 5 requests outstanding (its own small share of the CPU
time is counted too).

Run: .venv/bin/python bench/produce_probe.py [--repeat 3] [--seconds 2] [--only NAME,..] [--profile|--stages]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kafka.protocol.producer import ProduceRequest  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from broker.broker import Broker  # noqa: E402
from broker.config import BrokerConfig  # noqa: E402
from broker.handlers import produce  # noqa: E402
from broker.net.connection import _answer, serve_stream  # noqa: E402
from broker.net.listeners import Listener  # noqa: E402
from protocol.codec import decode_request, encode_response  # noqa: E402
from protocol.framing import FrameDecoder  # noqa: E402
from store import Store  # noqa: E402

VERSION = 9
SEGMENT_BYTES = 640 << 20  # one segment, faulted in before the run
WRITE_BUDGET = 600 << 20  # a run stops before the segment's end (no roll into unfaulted pages)
WARM_S = 0.5
IN_FLIGHT = 5  # requests a --socket client keeps outstanding (librdkafka's max.in.flight with idempotence)
CLIENT_ID = "produce-probe"


@dataclass(frozen=True)
class Shape:
    name: str
    partitions: int  # per request
    records: int  # per batch
    size: int  # bytes per record value
    acks: int = 1
    idempotent: bool = False


SHAPES = [
    Shape("one-1k-x16", 1, 16, 1024),
    Shape("one-1k-x1000", 1, 1000, 1024),
    Shape("one-1k-x16-idem", 1, 16, 1024, idempotent=True),
    Shape("one-1k-x16-all", 1, 16, 1024, acks=-1),
    Shape("one-16k-x16", 1, 16, 16384),
    Shape("wide-100p-1k-x1", 100, 1, 1024),
    Shape("wide-100p-1k-x1-idem", 100, 1, 1024, idempotent=True),
    Shape("wide-10p-16k-x4", 10, 4, 16384),
]


def build_batch(records: int, size: int, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    now = int(time.time() * 1000)
    value = b"x" * size
    for i in range(records):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def frame(topic: str, partitions: list[int], batches: list[bytes], acks: int, correlation: int) -> bytes:
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest[VERSION](transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=p, records=b)
                                         for p, b in zip(partitions, batches, strict=True)])])
    request.with_header(correlation_id=correlation, client_id=CLIENT_ID)
    return bytes(request.encode(header=True, framed=True))


def frames_for(shape: Shape, topic: str, count: int, producer_id: int) -> list[bytes]:
    """`count` frames; idempotent ones carry each partition's next sequence, so none is a duplicate."""
    parts = list(range(shape.partitions))
    if not shape.idempotent:
        batch = build_batch(shape.records, shape.size)
        return [frame(topic, parts, [batch] * len(parts), shape.acks, i) for i in range(count)]
    out = []
    for i in range(count):
        batch = build_batch(shape.records, shape.size, producer_id, i * shape.records)
        out.append(frame(topic, parts, [batch] * len(parts), shape.acks, i))
    return out


async def _run(broker: Broker, frames: list[bytes], seconds: float, max_requests: int) -> tuple[int, float]:
    """Feed frames (cycling) through the connection loop's steps for about `seconds`, or
    `max_requests`, whichever comes first."""
    decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
    n = 0
    cpu0 = time.thread_time()
    deadline = time.perf_counter() + seconds
    while True:
        for data in frames:
            decoder.feed(data)
            request = decoder.next_frame()
            answer = await _answer(broker, request, "probe")
            if answer is not None and answer[1] is not None:
                await answer[1]()
            n += 1
            if n == max_requests:
                return n, time.thread_time() - cpu0
        if time.perf_counter() >= deadline:
            return n, time.thread_time() - cpu0


def _timed(step, rounds: int) -> float:
    """Thread CPU microseconds per call of `step()`."""
    cpu0 = time.thread_time()
    for _ in range(rounds):
        step()
    return (time.thread_time() - cpu0) / rounds * 1e6


async def _stages(broker: Broker, frames: list[bytes], rounds: int) -> dict[str, float]:
    """Each step of a request timed alone, over the same frames (non-idempotent shapes: the
    appends are repeatable): framing, decode, the handler's checks, the store's append, the
    answer's body, its frame and the metrics."""
    decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
    data = frames[0]

    def framing() -> None:
        decoder.feed(data)
        decoder.next_frame()

    payload = data[4:]
    request = decode_request(payload)
    body = request.body
    keys = [(t.name, p.index, p.records) for t in body.topic_data for p in t.partition_data]
    version = request.header.api_version

    def check() -> list:
        policy = produce._TopicPolicy.of(broker, "probe", body.acks == -1)
        return [produce._check_one(broker, policy, t, p, r, version) for t, p, r in keys]

    accepted = check()
    items = [(a.topic, a.partition, a.batch, a.header) for a in accepted]
    appended = broker.store.append_many(items)
    results = dict.fromkeys((a.topic, a.partition) for a in accepted)
    produce._record_appends(broker, accepted, appended, results, [])
    answer = produce._response(request.header.api_version, results)
    out = {
        "framing": _timed(framing, rounds),
        "decode": _timed(lambda: decode_request(payload), rounds),
        "check": _timed(check, rounds),
        "append": _timed(lambda: broker.store.append_many(items), rounds),
        "record": _timed(lambda: produce._record_appends(broker, accepted, appended, results, []), rounds),
        "answer body": _timed(lambda: produce._response(version, results), rounds),
        "answer frame": _timed(lambda: encode_response(request.header, answer), rounds),
        "metrics": _timed(lambda: broker.metrics.request("Produce", len(payload), 40), rounds),
    }
    cpu0 = time.thread_time()
    for _ in range(rounds):
        decoder.feed(data)
        await _answer(broker, decoder.next_frame(), "probe")
    out["whole request"] = (time.thread_time() - cpu0) / rounds * 1e6
    return out


async def _socket_run(broker: Broker, frames: list[bytes], seconds: float, max_requests: int,
                      in_flight: int = IN_FLIGHT) -> tuple[int, float]:
    """The whole connection loop (broker/net/connection.py: serve_stream's reader and sender
    tasks, trio's socket calls, the kernel's) over a socket pair in this trio run: a client task
    keeps `in_flight` requests outstanding, as a producer does, and reads the answers."""
    server_sock, client_sock = trio.socket.socketpair()
    server = trio.SocketStream(server_sock)
    client = trio.SocketStream(client_sock)
    n = 0
    cpu0 = time.thread_time()
    deadline = time.perf_counter() + seconds
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_stream, broker, Listener("PLAINTEXT", "127.0.0.1", 0), server, "127.0.0.1:1")
        window = trio.Semaphore(in_flight)
        answered = trio.Event()
        count = max_requests

        async def read_answers() -> None:  # received into one buffer: the client's share stays small
            nonlocal n
            buf = bytearray(1 << 16)
            have = 0
            while n < count:
                with memoryview(buf) as view:
                    have += await client_sock.recv_into(view[have:])
                at = 0
                while have - at >= 4 and have - at >= 4 + int.from_bytes(buf[at:at + 4], "big"):
                    at += 4 + int.from_bytes(buf[at:at + 4], "big")
                    n += 1
                    window.release()
                buf[:have - at] = buf[at:have]
                have -= at
            answered.set()

        nursery.start_soon(read_answers)
        sent = 0
        while sent < count:
            for data in frames:
                await window.acquire()
                await client.send_all(data)
                sent += 1
                if sent == count:
                    break
            if time.perf_counter() >= deadline:
                count = sent
        await answered.wait()
        cpu = time.thread_time() - cpu0
        await client.aclose()
        nursery.cancel_scope.cancel()
    return n, cpu


async def _shape(shape: Shape, tmp: Path, seconds: float, profile: bool,
                 stages: bool = False, socket: bool = False) -> tuple[float, pstats.Stats | dict | None]:
    data = tmp / shape.name
    config = BrokerConfig(data_dir=data)
    config.set("commitlog.segment.bytes", str(SEGMENT_BYTES))
    store = Store.open(data, config.store_config())
    broker = Broker(config, store, "probe-cluster")
    try:
        meta = await broker.create_topic("probe", shape.partitions, {})
        assert meta.partitions == shape.partitions
        store.wait_for_preallocation()
        # the whole segment is allocated first: what is measured is the request's own work, not
        # the allocator's (posix_fallocate runs in its own thread in a broker)
        segment = store._log.active
        segment.grow(segment.size, False)
        one = len(frames_for(shape, "probe", 1, 0)[0])
        count = min(20_000, WRITE_BUDGET // one) if shape.idempotent else min(2_000, (64 << 20) // one)
        frames = frames_for(shape, "probe", count, producer_id=broker.producers.allocate_producer_id())
        per_request = len(frames[0])
        # the first thousands of appends after start cost twice the steady state's (the consume
        # queue's first files and reservations): warm up on 1/8 of the budget, idempotent shapes too
        # (with a producer id of their own, so the measured frames' sequences stay valid)
        warm = frames_for(shape, "probe", count, producer_id=broker.producers.allocate_producer_id()) \
            if shape.idempotent else frames
        await _run(broker, warm, WARM_S, (WRITE_BUDGET // 8) // per_request)
        if stages:  # each round appends twice: the append step's and the whole request's
            rounds = max(20, min(2_000, (WRITE_BUDGET - store._log.write_position) // per_request // 3))
            return 0.0, await _stages(broker, frames, rounds)
        budget = (WRITE_BUDGET - store._log.write_position) // per_request
        if shape.idempotent:  # each frame once: a second round would be duplicates, not appended
            budget = min(budget, len(frames))
        profiler = cProfile.Profile(time.thread_time) if profile else None
        if profiler:
            profiler.enable()
        n, cpu = await (_socket_run if socket else _run)(broker, frames, seconds, budget)
        if profiler:
            profiler.disable()
            return cpu / n * 1e6, pstats.Stats(profiler)
        return cpu / n * 1e6, None
    finally:
        store.close()
        shutil.rmtree(data, ignore_errors=True)


def _top(stats: pstats.Stats, n: int = 18) -> str:
    rows = stats.stats  # type: ignore[attr-defined]
    total = stats.total_tt  # type: ignore[attr-defined]
    lines = []
    for (file, line, name), (_, ncalls, tt, ct, _) in sorted(rows.items(), key=lambda kv: -kv[1][2])[:n]:
        where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if file != "~" else "builtin"
        lines.append(f"  {tt / total:6.1%} own {ct / total:6.1%} cum {ncalls:>9,}  {name}  {where}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--only", default="", help="comma-separated shape names (default: all)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--stages", action="store_true", help="time each step of a request alone")
    parser.add_argument("--socket", action="store_true",
                        help="through the connection loop over a socket pair, a client task in the same run")
    args = parser.parse_args()
    wanted = {s for s in args.only.split(",") if s}
    shapes = [s for s in SHAPES if not wanted or s.name in wanted]
    tmp = Path(tempfile.mkdtemp(prefix="gregor-produce-probe-"))
    try:
        if args.stages:
            for shape in (s for s in shapes if not s.idempotent):
                rows = [trio.run(_shape, shape, tmp, 0, False, True)[1] for _ in range(args.repeat)]
                spans = (f"{k} {min(r[k] for r in rows):.1f}-{max(r[k] for r in rows):.1f}" for k in rows[0])
                print(f"{shape.name}: " + ", ".join(spans) + " us")
            return 0
        for shape in shapes:
            figures = []
            for _ in range(1 if args.profile else args.repeat):
                us, stats = trio.run(_shape, shape, tmp, args.seconds, args.profile, False, args.socket)
                figures.append(us)
                if stats is not None:
                    print(f"{shape.name}: {us:.1f} us/request under cProfile")
                    print(_top(stats))
            low, high = min(figures) / shape.partitions, max(figures) / shape.partitions
            per_partition = "" if shape.partitions == 1 else f"  ({low:.2f}-{high:.2f} us/partition)"
            print(f"{shape.name:24s} {min(figures):8.1f}-{max(figures):8.1f} us/request  "
                  f"[{', '.join(f'{f:.1f}' for f in figures)}]{per_partition}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
