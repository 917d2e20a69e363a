"""Consume-queue disk blocks and next files are reserved ahead by the reserver thread, not by
the append path; a full disk still stops the writer cleanly."""

from __future__ import annotations

import os
import threading
import time

import pytest

import store.consume_queue as cq
from store import StorageFull, Store
from tests.store.conftest import append, build_batch, tiny_config

PER_FILE = 16  # tiny_config's queue_entries_per_file


@pytest.fixture
def allocations(monkeypatch):
    """(thread name, queue file name, first entry) of every block reservation."""
    seen: list[tuple[str, str, int]] = []
    real = cq._allocate

    def spy(path, start, length):
        seen.append((threading.current_thread().name, path.name, start // cq.ENTRY_SIZE))
        real(path, start, length)

    monkeypatch.setattr(cq, "_allocate", spy)
    return seen


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the reserver thread did not get there"
        time.sleep(0.005)


def test_the_next_file_is_made_and_reserved_before_the_writer_reaches_it(data_dir, allocations):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    q = s._partition("t", 0).queue
    batch = build_batch([b"v"])
    for _ in range(PER_FILE - 4):  # past half of the first file
        append(s, "t", 0, batch)
    _wait_for(lambda: q.reserved >= 2 * PER_FILE)
    next_file = f"{PER_FILE:020d}"
    assert (q.directory / next_file).exists()
    assert ("queue-reserver", next_file, 0) in allocations
    main = threading.current_thread().name
    before = [a for a in allocations if a[0] == main]
    for _ in range(8):  # into the second file
        append(s, "t", 0, batch)
    assert [a for a in allocations if a[0] == main] == before  # nothing reserved on the append path
    assert s.high_watermark("t", 0) == PER_FILE + 4
    assert len(s.read("t", 0, 0, 1 << 30).batches) == PER_FILE + 4
    s.close()


def test_a_full_disk_stops_the_writer_before_its_reservation_ends(data_dir, monkeypatch):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    q = s._partition("t", 0).queue
    batch = build_batch([b"v"])
    append(s, "t", 0, batch)
    _wait_for(lambda: q.reserve_requested < 0)
    full = True
    real = cq._allocate

    def allocate(path, start, length):
        if full:
            raise StorageFull(f"{path}: no space (test)")
        real(path, start, length)

    monkeypatch.setattr(cq, "_allocate", allocate)
    reserved = q.reserved
    for _ in range(reserved - 1):  # fill what was reserved: the reserver fails meanwhile
        append(s, "t", 0, batch)
    with pytest.raises(StorageFull):
        append(s, "t", 0, batch)
    assert s.high_watermark("t", 0) == reserved
    full = False
    assert append(s, "t", 0, batch).base_offset == reserved
    assert len(s.read("t", 0, 0, 1 << 30).batches) == reserved + 1
    s.close()


def test_a_deleted_queue_gets_no_files_from_the_reserver(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    q = s._partition("t", 0).queue
    append(s, "t", 0, build_batch([b"v"]))
    s.delete_topic("t")
    q.reserve_ahead(q.reserved)  # what the thread would do if it still held a current request
    assert not q.directory.exists()
    s.close()


def test_a_request_the_writer_has_overtaken_reserves_nothing(tmp_path):
    """The thread may serve a request after the writer, reaching the end first, reserved for
    itself: it then must not reserve (and create files) a further step ahead."""
    q = cq.ConsumeQueue.create(tmp_path / "q", PER_FILE)
    q.reserve(0, 7)
    seen = q.reserved  # what a request made now would carry
    q.reserve(14, 7)  # the writer crosses into the next file before the thread runs
    q.reserve_ahead(seen)
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == [f"{0:020d}", f"{PER_FILE:020d}"]
    assert q.reserved == 2 * PER_FILE
    q.reserve_ahead(q.reserved)  # a request that is still current is served
    assert q.reserved == 3 * PER_FILE
    assert (tmp_path / "q" / f"{2 * PER_FILE:020d}").exists()


def test_a_new_queue_has_its_first_page_backed_so_its_first_appends_reserve_nothing(data_dir, allocations):
    """Queues are made off the event loop (CreateTopics, a follower's state record): their first
    page gets its disk blocks there, and the first appends neither allocate nor wait for the
    disk; a partition never written holds one page."""
    s = Store.open(data_dir, tiny_config(queue_entries_per_file=100_000))
    s.create_topic("t", 2, {})
    q = s._partition("t", 0).queue
    assert q.reserved == cq.FIRST_RESERVE_ENTRIES == 4096 // cq.ENTRY_SIZE
    for p in (0, 1):  # one page of blocks per partition, no more
        held = os.stat(s._partition("t", p).queue.directory / f"{0:020d}").st_blocks * 512
        assert 4096 <= held < cq.RESERVE_ENTRIES * cq.ENTRY_SIZE
    main = threading.current_thread().name
    real = cq._allocate
    on_append_path: list[str] = []

    def spy(path, start, length):
        on_append_path.append(threading.current_thread().name)
        real(path, start, length)

    cq._allocate = spy
    try:
        for _ in range(cq.FIRST_RESERVE_ENTRIES):
            append(s, "t", 0, build_batch([b"v"]))
    finally:
        cq._allocate = real
    assert main not in on_append_path  # the reserver thread reserved further ahead, the writer nothing
    assert s.high_watermark("t", 0) == cq.FIRST_RESERVE_ENTRIES
    assert len(s.read("t", 0, 0, 1 << 30).batches) == cq.FIRST_RESERVE_ENTRIES
    s.close()


def test_a_topic_whose_first_queue_page_finds_the_disk_full_is_not_made(data_dir, monkeypatch):
    s = Store.open(data_dir, tiny_config())
    real = cq._allocate
    calls = []

    def allocate(path, start, length):
        calls.append(path)
        if len(calls) == 2:  # the second partition's first page
            raise StorageFull(f"{path}: no space (test)")
        real(path, start, length)

    monkeypatch.setattr(cq, "_allocate", allocate)
    with pytest.raises(StorageFull, match="cannot make the queue files of t"):
        s.create_topic("t", 3, {})
    assert "t" not in s.topics()
    assert not any((data_dir / "consumequeue").glob("t*/*/*"))  # nothing left of the partitions made
    monkeypatch.setattr(cq, "_allocate", real)
    s.create_topic("t", 3, {})  # once there is room
    append(s, "t", 2, build_batch([b"v"]))
    assert s.high_watermark("t", 2) == 1
    s.close()
