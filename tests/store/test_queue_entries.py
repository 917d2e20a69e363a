"""ConsumeQueue.entry: the entry it reads is the one in the file the queue holds now, never one
from a file it has let go (entry keeps the bytes of the file it read last)."""

from __future__ import annotations

import store.consume_queue as cq

PER_FILE = 16


def _filled(q: cq.ConsumeQueue, start: int, stop: int, position: int) -> None:
    q.reserve(start, stop - start)
    for offset in range(start, stop):
        q.put(offset, 1, position + offset, 100)
    q.high_watermark = stop


def test_entries_are_read_from_every_file_in_any_order(tmp_path):
    q = cq.ConsumeQueue.create(tmp_path / "q", PER_FILE)
    _filled(q, 0, 3 * PER_FILE, 1000)
    for offset in (40, 0, 17, 18, 47, 1):  # files 2, 0, 1, 1, 2, 0
        assert q.entry(offset) == (1000 + offset, 100)
    assert q.entry(3 * PER_FILE + 5) == (0, 0)  # no such file


def test_a_file_cleared_and_made_again_is_read_afresh(tmp_path):
    q = cq.ConsumeQueue.create(tmp_path / "q", PER_FILE)
    _filled(q, 0, 2 * PER_FILE, 1000)
    assert q.entry(PER_FILE + 3) == (1000 + PER_FILE + 3, 100)  # its bytes are kept now
    q.clear_after(PER_FILE - 2)  # a crash's leftovers: file 1 is deleted
    assert q.entry(PER_FILE + 3) == (0, 0)
    q.reserved = PER_FILE - 2  # as recovery leaves it: the next reservation creates file 1 again
    _filled(q, PER_FILE - 2, 2 * PER_FILE, 5000)
    assert q.entry(PER_FILE + 3) == (5000 + PER_FILE + 3, 100)


def test_a_deleted_queue_reads_no_entry(tmp_path):
    q = cq.ConsumeQueue.create(tmp_path / "q", PER_FILE)
    _filled(q, 0, 4, 1000)
    assert q.entry(2) == (1002, 100)
    q.delete()
    assert q.entry(2) == (0, 0)
