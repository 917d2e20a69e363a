"""The commitlog's disk and memory footprint: an empty log's 1 GiB segment holds one
ALLOCATE_STEP of disk blocks until writing begins, and nothing past the writer becomes
resident at start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from store.commitlog import ZERO_LEAD, CommitLog
from store.segment import ALLOCATE_STEP
from tests.kit.gregor import ROOT
from tests.kit.wait import wait_until

GIB = 1 << 30


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def _mapped_kib(pid: int, directory: Path) -> int:
    """KiB of the process's memory resident in mappings of files under `directory` (/proc/PID/smaps)."""
    total, inside, prefix = 0, False, f"{directory.resolve()}/"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if not fields:
            continue
        if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header line
            inside = len(fields) >= 6 and fields[5].startswith(prefix)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def test_an_empty_log_holds_one_step_and_whole_segments_once_written(tmp_path):
    """An empty log's first segment has ALLOCATE_STEP of disk; once the writer is half a step
    in, the rest of it and the whole next segment are allocated ahead (MetaQ's preallocation:
    one posix_fallocate per segment, none on the append path)."""
    segment = 256 << 20
    log = CommitLog(tmp_path, segment)
    log.start_allocator()
    try:
        # the allocator's start-up pass ends by setting the writer's trigger (an empty log: half a step in)
        wait_until(lambda: log._alloc_trigger == log.active.start + ALLOCATE_STEP // 2, 10,
                   "the allocator's start-up pass")
        assert _disk_bytes(tmp_path) <= ALLOCATE_STEP and log.active.allocated == ALLOCATE_STEP
        payload = bytes(61) + os.urandom(1 << 20)
        for _ in range(ALLOCATE_STEP // (2 << 20) + 2):  # just past half a step
            log.append(payload, bytes(16), b"t", 0, 0, 1, 1, 1)
        deadline = time.monotonic() + 30
        while (log._ahead is None or log.active.allocated < segment) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.active.allocated == segment and log._ahead is not None and log._ahead.allocated == segment
        assert 2 * segment - (1 << 20) <= _disk_bytes(tmp_path) <= 2 * segment + (1 << 20)
    finally:
        log.close()


def test_sync_mode_zero_fills_a_bounded_lead_ahead_of_the_writer_not_whole_segments(tmp_path):
    """In sync mode every allocated byte is written with zeros first (segment.write_zeros), so the
    allocator keeps ZERO_LEAD of zeros ahead of the writer, a step at a time, and makes the next
    segment with one step only once the active one is zero-filled to its end: not a segment and a
    half of zeros the moment writing begins, which kept the disk busy behind every fdatasync."""
    segment = 3 * ALLOCATE_STEP
    log = CommitLog(tmp_path, segment, prezero=True)
    log.start_allocator()
    payload = bytes(61) + os.urandom(1 << 20)

    def write_to(position: int) -> None:  # up to the first entry that passes `position`, no further
        while log.write_position <= position:
            log.append(payload, bytes(16), b"t", 0, 0, 1, 1, 1)

    try:
        # each allocator pass ends by setting the writer's next trigger: half a step in, then the lead down to a step
        wait_until(lambda: log._alloc_trigger == ALLOCATE_STEP // 2, 10, "the allocator's start-up pass")
        assert log.active.allocated == ALLOCATE_STEP and _disk_bytes(tmp_path) <= ALLOCATE_STEP
        write_to(ALLOCATE_STEP // 2)  # half a step in (the entry that passes it wakes the allocator): the lead is zero-filled, no further
        lead_end = log.write_position + ZERO_LEAD
        wait_until(lambda: log._alloc_trigger == lead_end - ALLOCATE_STEP, 30, "the zeros ahead of the writer")
        assert log.active.allocated == lead_end < segment and log._ahead is None
        assert _disk_bytes(tmp_path) <= lead_end + (1 << 20)
        write_to(lead_end - ALLOCATE_STEP)  # the lead down to a step: zeros to the end, a next segment
        wait_until(lambda: log._ahead is not None, 30, "the next segment")
        assert log.active.allocated == segment and log._ahead.allocated == ALLOCATE_STEP
        assert _disk_bytes(tmp_path) <= segment + ALLOCATE_STEP + (1 << 20)
    finally:
        log.close()


def test_an_empty_broker_on_the_embedded_default_is_small(tmp_path):
    """What `bash bin/serve` starts (1 GiB segments, async flush) on an empty data dir: about
    one allocation step of disk, and well under 150 MiB resident (it was 2 GiB and 1,082 MiB)."""
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp_path / "data"),
                                 "--port", "0", "--log-level", "INFO"], cwd=ROOT, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while "gregor ready" not in log_path.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        # appends are written with pwrite(), never through the mapping: nothing of it is resident
        # but what start-up wrote (the state topic's first records)
        mapped_kib = _mapped_kib(proc.pid, tmp_path / "data" / "commitlog")
        assert mapped_kib <= 1024, f"{mapped_kib} KiB of the commitlog's mapping resident"
        rss_mib = int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{proc.pid}/status").read_text()).group(1)) // 1024
        disk_mib = _disk_bytes(tmp_path / "data") >> 20
        assert disk_mib <= 100, f"{disk_mib} MiB of disk"
        assert rss_mib <= 150, f"{rss_mib} MiB resident"
    finally:
        proc.terminate()
        proc.wait(30)
