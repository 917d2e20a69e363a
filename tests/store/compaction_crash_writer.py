"""Crash-test writer for log compaction: appends keyed records to a compacted topic in sync
mode, cleans and runs retention (which carries live batches and deletes segments) as it goes,
and prints each append once it is durable. Killed with SIGKILL by test_compaction.py.

Run as `python -m tests.store.compaction_crash_writer DATA_DIR`. A record's value is
"<key>:<offset>" so the checker can tell a misplaced record from a right one.
"""

from __future__ import annotations

import random
import sys

from protocol.record_batch import parse_header
from store import Store, StoreConfig
from tests.store.conftest import build_batch

KEYS = 20


def config() -> StoreConfig:
    return StoreConfig(segment_bytes=16384, queue_entries_per_file=50, flush_mode="sync", retention_ms=-1,
                       key_index_slots=16, key_index_entries=256, cleaner_enable=False)


def main(data_dir: str) -> None:
    store = Store.open(data_dir, config())
    if "c" not in store.topics():
        store.create_topic("c", 1, {"cleanup.policy": "compact"})
    rng = random.Random()
    while True:
        hw = store.high_watermark("c", 0)
        keys = [b"k%d" % rng.randrange(KEYS) for _ in range(rng.randint(1, 5))]
        values = [k + b":%d" % (hw + i) + b"." * rng.randint(0, 300) for i, k in enumerate(keys)]
        batch = build_batch(values, keys=keys)
        result = store.append("c", 0, batch, parse_header(batch))
        result.flush.wait()
        print(result.base_offset, b",".join(keys).decode(), flush=True)
        if rng.random() < 0.1:
            store.clean(force=True)
        if rng.random() < 0.05:
            store.enforce_retention()


if __name__ == "__main__":
    main(sys.argv[1])
