"""The async-mode prefaulter: pages ahead of the writer are faulted in off the append path,
and faulting them in never changes a byte."""

from __future__ import annotations

import os
import time
from pathlib import Path

from store import commitlog as C
from store.commitlog import CommitLog

TOPIC_ID = bytes(16)


def _resident_kib(path: Path) -> int:
    """Resident size of this process's mapping of `path`, from /proc/self/smaps."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            for field in lines[i + 1:]:
                if field.startswith("Rss:"):
                    return int(field.split()[1])
    raise AssertionError(f"{path} is not mapped")


def _append(log: CommitLog, payload: bytes) -> int:
    batch = bytes(61) + payload  # the entry rewrites base offset and length in the batch header
    return log.append(batch, TOPIC_ID, b"t", 0, 0, 1, 1, 1)


def test_pages_ahead_of_the_writer_become_resident(tmp_path, monkeypatch):
    monkeypatch.setattr(C, "PREFAULT_WINDOW", 8 << 20)
    monkeypatch.setattr(C, "PREFAULT_STEP", 1 << 20)
    log = CommitLog(tmp_path, 32 << 20, prefault=True)
    path = log.active.path
    before = _resident_kib(path)
    log.start_allocator()
    try:
        _append(log, b"x" * 1000)
        deadline = time.monotonic() + 10
        while log._prefaulted < log.write_position + (8 << 20) - 4096 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log._prefaulted >= log.write_position + (8 << 20) - 4096
        assert _resident_kib(path) - before >= 7 * 1024
    finally:
        log.close()


def test_prefaulting_over_written_bytes_keeps_them(tmp_path):
    log = CommitLog(tmp_path, 1 << 20)
    data = os.urandom(200_000)
    position = _append(log, data)
    assert log.active.populate(0, 1 << 20)
    assert bytes(log.view(position + 61, len(data))) == data
    log.close()


def test_sync_mode_has_no_prefaulter(tmp_path):
    log = CommitLog(tmp_path, 1 << 20, prezero=True)
    log.start_allocator()
    try:
        assert log._prefaulter is None
    finally:
        log.close()
