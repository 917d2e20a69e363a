"""The commitlog's write path (store/commitlog.py `append`): entries are written with pwrite(),
never through the mapping, and a large batch in a writable buffer is written from where it lies
(pwritev) — byte for byte the entry a copied batch makes, its request buffer left untouched."""

from __future__ import annotations

import os
from pathlib import Path

from store import entry as E
from store.commitlog import DIRECT_BYTES, CommitLog


def _entry(log: CommitLog, batch) -> bytes:
    log.append(batch, bytes(range(16)), b"orders", 3, 100, 5, 7, 8, 2)
    return bytes(log.view(0, log.write_position))


def test_a_large_batch_written_from_its_own_buffer_makes_the_same_entry_as_a_copied_one(tmp_path):
    payload = bytearray(os.urandom(DIRECT_BYTES * 3))
    before = bytes(payload)
    direct = _entry(CommitLog(tmp_path / "direct", 1 << 24), memoryview(payload))
    copied = _entry(CommitLog(tmp_path / "copied", 1 << 24), before)
    assert direct == copied
    assert bytes(payload) == before  # the rewritten base offset and length are the entry's, not the request's
    header = E.read_entry(memoryview(direct), 0, 0)
    assert isinstance(header, E.EntryHeader) and (header.partition, header.base_offset, header.topic) == (3, 100, "orders")


def test_appending_faults_nothing_of_the_mapping_in(tmp_path):
    log = CommitLog(tmp_path, 1 << 24)
    for size in (100, DIRECT_BYTES, DIRECT_BYTES * 2):
        log.append(memoryview(bytearray(os.urandom(size))), bytes(16), b"t", 0, 0, 1, 1, 1)
    smaps = Path("/proc/self/smaps").read_text().split("\n")
    at = next(i for i, line in enumerate(smaps) if line.endswith(str(log.active.path)))
    rss = next(int(line.split()[1]) for line in smaps[at + 1:] if line.startswith("Rss:"))
    assert rss == 0  # a store through the mapping would have made its pages resident here
    assert log.view(0, log.write_position)[E.HEADER_SIZE + 16:E.HEADER_SIZE + 17]  # readers see the bytes
