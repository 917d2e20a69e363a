"""What one Fetch of many partitions costs the broker, sessionless against incremental (KIP-227):
the broker's own work per request, from the request frame's bytes to the answer's buffers
(decode_request, handle_fetch, encode_response), no network and no client.

Run: .venv/bin/python bench/fetch_session_bench.py [--partitions 1000] [--requests 200] [--repeat 3]
An in-process Gregor (temporary data) gets a topic of N partitions with one record each. Then, on
its event loop, the same idle consumer's fetch (every partition at its high watermark, max_wait_ms
0, Fetch v17 by topic id) is served `--requests` times each way: a sessionless full fetch
(session_id 0, epoch -1) listing every partition, and an incremental fetch of an open session that
lists none (nothing changed). Prints the median and 90th percentile per request, split into
decoding the request, handling it and encoding the answer, and the frame and answer sizes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from broker.handlers.fetch import handle_fetch
from protocol.codec import decode_request, encode_response
from tests.kit.inprocess import InProcessBroker
from tests.kit.wire import batch

TOPIC = "wide"


def _frame(topic_id, partitions: int, session_id: int, epoch: int, listed: bool) -> bytes:
    F = FetchRequest.FetchTopic
    parts = [F.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=1, last_fetched_epoch=-1,
                              log_start_offset=-1, partition_max_bytes=1 << 20) for p in range(partitions)]
    request = FetchRequest[17](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
                               session_id=session_id, session_epoch=epoch,
                               topics=[F(topic_id=topic_id, partitions=parts)] if listed else [],
                               forgotten_topics_data=[], rack_id="")
    request.with_header(correlation_id=1, client_id="bench")
    return bytes(request.encode(header=True, framed=False))


async def _serve(broker, frame: bytes) -> tuple[float, float, float, int, object]:
    t0 = time.perf_counter()
    request = decode_request(frame)
    t1 = time.perf_counter()
    body = await handle_fetch(broker, request)
    t2 = time.perf_counter()
    out = encode_response(request.header, body)
    t3 = time.perf_counter()
    size = sum(map(len, out)) if isinstance(out, list) else len(out)
    return t1 - t0, t2 - t1, t3 - t2, size, request


def _measure(inproc: InProcessBroker, partitions: int, requests: int) -> dict[str, list]:
    broker = inproc.broker
    topic_id = broker.store.topic(TOPIC).topic_id

    async def run() -> dict[str, list]:
        results: dict[str, list] = {"sessionless full": [], "incremental, nothing new": []}
        full = _frame(topic_id, partitions, 0, -1, listed=True)
        for _ in range(requests):
            results["sessionless full"].append((*(await _serve(broker, full))[:4], len(full)))
        opened = await handle_fetch(broker, decode_request(_frame(topic_id, partitions, 0, 0, listed=True)))
        session_id = int.from_bytes(bytes(opened[0])[6:10], "big")  # throttle_time_ms, error_code, session_id
        assert session_id > 0, "no session opened"
        for epoch in range(1, requests + 1):
            frame = _frame(topic_id, partitions, session_id, epoch, listed=False)
            results["incremental, nothing new"].append((*(await _serve(broker, frame))[:4], len(frame)))
        return results

    return inproc.call(run)


def ms(values) -> float:
    return statistics.median(values) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fetch-session-bench-"))
    try:
        with InProcessBroker(tmp / "data", **{"auto.create.topics.enable": "false"}) as inproc:
            inproc.call(inproc.broker.topology.create_topic, TOPIC, args.partitions, {})
            client = inproc.client(timeout=60)
            T = ProduceRequest.TopicProduceData
            records = batch(1)
            answer = client.request(ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
                T(name=TOPIC, partition_data=[T.PartitionProduceData(index=p, records=records)
                                              for p in range(args.partitions)])]))
            assert all(p.error_code == 0 for p in answer.responses[0].partition_responses)
            client.close()
            for run in range(1, args.repeat + 1):
                for name, rows in _measure(inproc, args.partitions, args.requests).items():
                    decode, handle, encode, answer, frame = zip(*rows)
                    total = [a + b + c for a, b, c in zip(decode, handle, encode)]
                    p90 = statistics.quantiles(total, n=10)[-1] * 1000
                    print(f"run {run} {name:26} {args.partitions} partitions: median {ms(total):7.3f} ms "
                          f"(decode {ms(decode):.3f}, handle {ms(handle):.3f}, encode {ms(encode):.3f}), "
                          f"p90 {p90:.3f} ms; request {frame[0]} B, answer {answer[0]} B")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
