"""Crash-test writer: appends in sync mode and prints each append once its flush completed.

Run as `python -m tests.store.crash_writer DATA_DIR`; killed with SIGKILL by test_crash.py.
Record values are "<partition>:<offset>" so the checker can spot duplicates and gaps.
"""

from __future__ import annotations

import random
import sys

from protocol.record_batch import parse_header
from store import Store, StoreConfig
from tests.store.conftest import build_batch

PARTITIONS = 3


def main(data_dir: str) -> None:
    config = StoreConfig(segment_bytes=16384, queue_entries_per_file=50, flush_mode="sync",
                         retention_ms=-1, key_index_slots=16, key_index_entries=256)
    store = Store.open(data_dir, config)
    if "c" not in store.topics():
        store.create_topic("c", PARTITIONS, {"key.index.enable": "true", "tag.header": "tag"})
    rng = random.Random()
    while True:
        p = rng.randrange(PARTITIONS)
        hw = store.high_watermark("c", p)
        n = rng.randint(1, 3)
        values = [f"{p}:{hw + i}".encode() + b"." * rng.randint(0, 400) for i in range(n)]
        batch = build_batch(values, keys=[b"k%d" % (hw + i) for i in range(n)],
                            headers=[[("tag", b"t")]] * n)
        result = store.append("c", p, batch, parse_header(batch))
        assert result.base_offset == hw
        result.flush.wait()
        print(p, result.base_offset, result.last_offset, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
