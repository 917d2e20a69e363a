"""Crash safety: SIGKILL a sync-mode writer at random moments; acknowledged appends survive."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from protocol.record_batch import parse_header
from store import Store, StoreConfig
from store.records import decode
from tests.store.conftest import kill_at_random
from tests.store.crash_writer import PARTITIONS
from tests.kit.tier import soak


def _check(data_dir: Path, acked: dict[int, int]) -> None:
    config = StoreConfig(segment_bytes=16384, queue_entries_per_file=50, key_index_slots=16,
                         key_index_entries=256, retention_ms=-1)
    store = Store.open(data_dir, config)
    try:
        if "c" not in store.topics():
            assert not acked
            return
        for p in range(PARTITIONS):
            hw = store.high_watermark("c", p)
            assert hw > acked.get(p, -1), f"partition {p}: acknowledged offset {acked.get(p)} lost"
            expected = 0
            for view in store.read("c", p, 0, 1 << 30).batches:
                for record in decode(view):
                    assert record.offset == expected, "gap or duplicate"
                    assert record.value.split(b".")[0] == f"{p}:{expected}".encode()
                    expected += 1
            assert expected == hw
            q = store._partition("c", p).queue
            for offset in range(hw):  # every queue entry points at the batch holding it
                pos, size = q.entry(offset)
                header = parse_header(store._log.view(pos, size))
                assert header.base_offset <= offset <= header.base_offset + header.last_offset_delta
        if hw:
            assert store.lookup_key("c", b"k0", 0, 2**62)
    finally:
        store.close()


@pytest.mark.crash
def test_sigkill_never_loses_acknowledged_appends(tmp_path):
    data_dir = tmp_path / "data"
    acked: dict[int, int] = {}
    rng = random.Random(7)
    for _ in range(soak(full=20, push=8)):
        for line in kill_at_random("tests.store.crash_writer", data_dir, rng, 0.05, 0.6):
            parts = line.split()
            if len(parts) == 3:  # a line cut by the kill was never fully acknowledged
                p, _, last = map(int, parts)
                acked[p] = max(acked.get(p, -1), last)
        _check(data_dir, acked)
    assert sum(acked.values()) > 100
