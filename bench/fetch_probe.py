"""The fetch path's cost per request, in process and step by step: a broker with a real store, no socket.

The fetch counterpart of `bench/produce_probe.py --stages`. Each case writes its partitions first
(batches of 1 KiB records), then times each step of the same sessionless Fetch v12 request alone
(decode, the request's partitions, the session context, the checks, the reads, the answer) and
the whole request through the connection loop's `_answer`, as thread CPU time per call. No client
shares the CPU, so the figures move little between runs, unlike bench/fetch_loopback.py's.

Cases: one partition answering one batch of 16 x 1 KiB (librdkafka's pattern); 100 partitions of
one 1 KiB record each (the Java client's and kafka-python's).

Run: .venv/bin/python bench/fetch_probe.py [--repeat 3] [--rounds 3000] [--only NAME,..]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fetch_loopback import fetch_request
from produce_probe import _timed, build_batch, frame

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.handlers import fetch
from broker.net.connection import _answer
from protocol.codec import decode_request
from protocol.framing import FrameDecoder
from store import Store

CASES = {"one-1k-x16": (1, 16), "wide-100p-1k-x1": (100, 1)}  # name: (partitions, records per batch)
VERSION = 12


async def _stages(tmp: Path, partitions: int, records: int, rounds: int) -> dict[str, float]:
    config = BrokerConfig(data_dir=tmp)
    store = Store.open(tmp, config.store_config())
    broker = Broker(config, store, "probe-cluster")
    try:
        await broker.create_topic("probe", partitions, {})
        store.wait_for_preallocation()
        decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
        batch = build_batch(records, 1024)
        decoder.feed(frame("probe", list(range(partitions)), [batch] * partitions, 1, 1))
        await _answer(broker, decoder.next_frame(), "probe")  # the data every request reads
        request_frame = bytes(fetch_request(partitions, 1 << 20))
        payload = request_frame[4:]
        body = decode_request(payload).body
        name_of = store.topic_name
        sessions = broker.fetch_sessions

        def data():
            return fetch.fetch_data(body, VERSION, name_of)

        wanted = data()
        context = sessions.new_context(VERSION, 0, -1, wanted, [], False, 0)
        items = list(context.partitions.items())
        _, readable = fetch._check(broker, items)
        answers = fetch._read_all(broker, body, VERSION, readable)[0]
        out = {
            "decode": _timed(lambda: decode_request(payload), rounds),
            "partitions": _timed(data, rounds),
            # a sessionless request's context (epoch -1) keeps the partitions it is given as they are
            "session context": _timed(lambda: sessions.new_context(VERSION, 0, -1, wanted, [], False, 0), rounds),
            "checks": _timed(lambda: fetch._check(broker, items), rounds),
            "reads": _timed(lambda: fetch._read_all(broker, body, VERSION, readable), rounds),
            "answer": _timed(lambda: fetch._encode(broker, VERSION, answers, 0, 0), rounds),
        }
        cpu0 = time.thread_time()
        for _ in range(rounds):
            decoder.feed(request_frame)
            await _answer(broker, decoder.next_frame(), "probe")
        out["whole request"] = (time.thread_time() - cpu0) / rounds * 1e6
        return out
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    wanted = {s for s in args.only.split(",") if s}
    tmp = Path(tempfile.mkdtemp(prefix="gregor-fetch-probe-"))
    try:
        for name, (partitions, records) in CASES.items():
            if wanted and name not in wanted:
                continue
            rows = []
            for i in range(args.repeat):
                rows.append(trio.run(_stages, tmp / f"{name}-{i}", partitions, records, args.rounds))
            spans = (f"{k} {min(r[k] for r in rows):.1f}-{max(r[k] for r in rows):.1f}" for k in rows[0])
            print(f"{name}: " + ", ".join(spans) + " us", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
