"""A full page cache before each measured case: the state of a broker machine that has been up
for a while, not of a freshly booted VM.

Why: on this kind of VM (a virtio balloon with free-page reporting) the guest hands freed
memory back to the host, and the first write to a page it takes back costs a host fault. Writing
into the page cache was measured at 2.1-2.8 CPU s/GiB in memory the guest had not used lately,
against 0.15-0.26 s/GiB once the page cache held nearly all of memory (512 MiB files, pwrite or
mmap alike). perf on a 3-node Gregor group under acks=all put 48% of the master's CPU and 68% of
each follower's in the kernel's memset zeroing such pages. Three nodes on one machine write three
copies, so a cold page cache charges a group three times what it charges one node, which is a
cost that separate machines would pay in parallel. A broker that has run for a while has a full
page cache, and its new pages come from reclaiming old ones. Measured both ways on one day
(docs/benchmarks.md, replication): every figure rose by a third to a half, the ratios between
one node and the group barely moved.

So before a case, Ballast.top_up() writes clean files (written, then fdatasync'd, so no
writeback runs during the case) until MemFree is down to KEEP_FREE or the kernel reclaims as
fast as they are written (on this VM about 2 GiB stays free: the DMA32 zone's reserve). The brokers' writes then
reclaim ballast pages. Files the kernel has mostly evicted are rewritten in place (fincore is
Debian's util-linux), so the disk holds at most about one memory's worth of ballast. If less
disk than that is free, the ballast is smaller (`short` says by how much). Before a top-up, files
are deleted (those least in the page cache first) until the disk has `disk_reserve` free again:
the brokers' data grows from case to case, and once it fills the page cache the ballast is no
longer needed for that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

KEEP_FREE = 1 << 30  # MemFree left: processes' own allocations come from here before reclaim
FILE_BYTES = 256 << 20
_BLOCK = bytes(8 << 20)


def mem_free() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemFree:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemFree in /proc/meminfo")


def resident(path: Path) -> int:
    """Bytes of the file in the page cache (util-linux fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


class Ballast:
    def __init__(self, directory: Path, disk_reserve: int) -> None:
        self.directory = directory
        self.disk_reserve = disk_reserve  # left free on disk for the brokers' data
        self.files: list[Path] = []
        self.short = 0  # bytes the last top-up could not write for want of disk

    @staticmethod
    def available() -> str | None:
        """Why a ballast cannot be used here, or None."""
        if not Path("/proc/meminfo").exists():
            return "no /proc/meminfo"
        if shutil.which("fincore") is None:
            return "no fincore (util-linux)"
        return None

    def top_up(self) -> float:
        """Make room on disk (disk_reserve free, deleting ballast), then fill the page cache
        until MemFree is KEEP_FREE, or until writing a file no longer lowers it (the kernel
        reclaims as fast as this writes: the rest is held back, such as the low zones'
        reserve); returns the seconds it took."""
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.short = 0
        if self.files and shutil.disk_usage(self.directory).free < self.disk_reserve:
            for path in sorted(self.files, key=resident):
                self.files.remove(path)
                path.unlink()
                if shutil.disk_usage(self.directory).free >= self.disk_reserve:
                    break
        evicted = [path for path in self.files if resident(path) < FILE_BYTES // 2]  # rewritten first: no new disk
        while (before := mem_free()) > KEEP_FREE:
            if evicted:
                path = evicted.pop()
            elif shutil.disk_usage(self.directory).free - FILE_BYTES < self.disk_reserve:
                self.short = before - KEEP_FREE
                break
            else:
                path = self.directory / f"ballast-{len(self.files):04d}"
                self.files.append(path)
            self._write(path)
            if before - mem_free() < FILE_BYTES // 2:
                break
        return time.monotonic() - started

    @staticmethod
    def _write(path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            view = memoryview(_BLOCK)
            for offset in range(0, FILE_BYTES, len(_BLOCK)):
                os.pwrite(fd, view, offset)
            os.fdatasync(fd)  # clean pages: no writeback competes with the case
        finally:
            os.close(fd)
