"""Keys indexed on by default, off the broker's GIL (issue 23, part A): the key worker process
reads record keys out of the commitlog, the dispatcher thread adds them with numpy."""

from __future__ import annotations

import os
import signal

import numpy as np

from store.key_entries import index_entries
from store.key_index import IndexFile, KeyIndex
from store.key_worker import KeyWorker
from tests.kit.wait import wait_until
from tests.store.conftest import append, build_batch


def test_add_many_builds_the_same_chains_as_one_add_at_a_time(tmp_path):
    rng = np.random.default_rng(7)
    one, many = (IndexFile.create(tmp_path / name, 16, 600) for name in ("one", "many"))
    for _ in range(3):  # three calls: chains continue across them
        n = 150
        hashes = rng.integers(0, 40, n, dtype=np.uint64)  # 16 slots, 40 hashes: many collisions
        positions = np.arange(n, dtype=np.int64) * 100 + int(one.count) * 100
        stamps = np.arange(n, dtype=np.int64) + 1_000 + one.count
        deltas = rng.integers(0, 5, n, dtype=np.uint32)
        for h, p, t, d in zip(hashes, positions, stamps, deltas):
            one.add(int(h), int(p), int(t), int(d))
        many.add_many(hashes, positions, stamps, deltas)
    assert bytes(one.mm) == bytes(many.mm)  # header, slots and every entry
    assert list(many.candidates(5, 0, 2**62)) == list(one.candidates(5, 0, 2**62))


def test_add_many_fills_the_last_file_then_makes_new_ones_first(tmp_path):
    index = KeyIndex(tmp_path / "index", 8, 64)
    n = 150
    index.add_many(np.arange(n, dtype=np.uint64), np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64),
                   np.zeros(n, dtype=np.uint32))
    assert [f.count for f in index.files] == [64, 64, 22]
    assert [p for p, _ in index.candidates(149, 0, 2**62)] == [149]


def test_the_worker_reads_the_same_keys_as_the_dispatcher_thread(store):
    store.create_topic("t", 2, {})
    store.create_topic("quiet", 1, {"key.index.enable": "false"})
    for i in range(30):
        append(store, "t", i % 2, build_batch([b"v", b"w"], keys=[f"k{i}".encode(), None]))
        append(store, "quiet", 0, build_batch([b"v"], keys=[b"secret"]))
    seg = store._log.segments[0]
    stop = min(seg.size, store._log.write_position - seg.start)
    local, expected = index_entries(seg, 0, stop, False, store._keys_indexed)
    worker = KeyWorker.start()
    try:
        reached, got = worker.index(seg.path, seg.start, seg.size, 0, stop, False, store._key_indexed_ids(), 1 << 30)
    finally:
        worker.close()
    assert reached == local and len(expected[0]) > 10  # the first 8 KiB segment's keys
    for ours, theirs in zip(expected, got):
        assert (ours == theirs).all()


def _worker_pids() -> list[int]:
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if int(fields[1]) == me and b"store.key_worker" in cmd:
                pids.append(int(entry))
    return pids


def test_keys_are_indexed_by_a_second_process_and_a_killed_one_is_replaced(store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"v"], keys=[b"alice"]))
    assert [h.offset for h in store.lookup_key("t", b"alice", 0, 2**62)] == [0]
    pids = _worker_pids()
    assert len(pids) == 1  # the work happened in a child process of this one
    os.kill(pids[0], signal.SIGKILL)
    # the dispatcher thread notices the death (it reaps the process) and starts another worker
    wait_until(lambda: [p for p in _worker_pids() if p != pids[0]], 10, "a key worker replacing the killed one")
    append(store, "t", 0, build_batch([b"v"], keys=[b"bob"]))
    assert [h.offset for h in store.lookup_key("t", b"bob", 0, 2**62, wait_s=5)] == [1]
    assert store.key_index_behind() == 0
