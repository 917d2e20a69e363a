"""One commitlog segment file: a fixed-size, memory-mapped file, given disk blocks in steps.

Owns creating (the full length, sparse, with its first ALLOCATE_STEP bytes allocated),
growing the allocated part ahead of the writer (posix_fallocate, so a full disk fails there
and never on a write through the mapping), mapping, fsyncing and unlinking one file. Never decides what goes into it, and never
closes its mmap: readers may still hold memoryviews over it, so releasing is by dropping
references.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
from pathlib import Path

from store.errors import StorageFull

MS_SYNC = 4  # Linux
_libc = ctypes.CDLL(None, use_errno=True)
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


# pwrite (and pwritev) through PyDLL keep the GIL across the call. os.pwrite releases it, and a sync-mode
# append is a 1 KiB copy into the page cache (about 1 us): releasing the GIL for that handed
# it to another appender thread at every append, and 16 appenders then spent more time
# passing the GIL around than in fdatasync (probe: group commit 30 MB/s with os.pwrite).
_libc_gil = ctypes.PyDLL(None, use_errno=True)
_pwrite = _libc_gil.pwrite
_pwrite.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64]
_pwrite.restype = ctypes.c_ssize_t


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


_pwritev = _libc_gil.pwritev
_pwritev.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_int, ctypes.c_int64]
_pwritev.restype = ctypes.c_ssize_t


class WriteBuffer:
    """A fixed buffer that is filled in place, then written to a file with pwrite(2), alone or
    around another writable buffer's bytes (pwritev(2): those are not copied into it)."""

    __slots__ = ("_address", "_anchor", "_iov", "view")

    def __init__(self, size: int) -> None:
        data = bytearray(size)
        self._anchor = ctypes.c_char.from_buffer(data)  # pins the buffer: it cannot move
        self._address = ctypes.addressof(self._anchor)
        self._iov = (_Iovec * 3)()
        self.view = memoryview(data)

    def pwrite(self, fd: int, length: int, offset: int) -> None:
        """Write view[:length] at `offset` of `fd`; raises OSError unless all of it is written."""
        _check(_pwrite(fd, self._address, length, offset), length, offset)

    def pwrite_around(self, fd: int, head: int, middle: memoryview, tail_at: int, tail: int, offset: int) -> None:
        """Write view[:head], then `middle` (a writable buffer), then view[tail_at:tail_at+tail]
        at `offset` of `fd`, in one call; raises OSError unless all of it is written."""
        anchor = ctypes.c_char.from_buffer(middle)  # its address; the export ends with the call
        iov = self._iov
        iov[0].base, iov[0].length = self._address, head
        iov[1].base, iov[1].length = ctypes.addressof(anchor), len(middle)
        iov[2].base, iov[2].length = self._address + tail_at, tail
        total = head + len(middle) + tail
        written = _pwritev(fd, iov, 3, offset)
        del anchor
        _check(written, total, offset)


def _check(written: int, length: int, offset: int) -> None:
    if written != length:
        err = ctypes.get_errno() if written < 0 else errno.EIO
        raise OSError(err, f"commitlog write of {length} bytes at {offset}: {os.strerror(err)}")


def _address(mm: mmap.mmap) -> int:
    anchor = ctypes.c_char.from_buffer(mm)
    address = ctypes.addressof(anchor)
    del anchor  # the export would otherwise pin the mapping; the caller's reference keeps it alive
    return address


def sync_mapping(mm: mmap.mmap) -> None:
    """msync(MS_SYNC) a whole writable mapping, with the GIL released: CPython's mmap.flush holds
    it through the call (a 256 MiB msync stalled every other thread for 167 ms in a probe), and
    checkpoints msync consume queues from a background thread while the event loop runs."""
    if _libc.msync(_address(mm), len(mm), MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_libc.syncfs.argtypes = [ctypes.c_int]


def sync_filesystem(path: Path) -> None:
    """syncfs(2) of the file system holding `path`: every dirty page there, written through a
    mapping or not, reaches the disk in one writeback (GIL released). A checkpoint after
    appends to 6,000 partitions msynced 6,000 consume-queue mappings in 1.05 s (0.47 s of CPU);
    one syncfs did it in 0.15 s (0.04 s of CPU). Errors (EIO since Linux 5.8) raise OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs of {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


# An empty log's first segment gets this much disk; the rest of it is allocated (one call)
# once the writer is half-way into it, and every later segment is allocated whole, ahead of
# need, as MetaQ preallocates. An idle broker holds one step, not two whole 1 GiB segments.
ALLOCATE_STEP = 64 << 20


def segment_name(start: int) -> str:
    return f"{start:020d}"


_ZEROS = bytes(1 << 20)


def write_zeros(fd: int, start: int, length: int) -> None:
    """Overwrite [start, start+length) of the file with real zeros (RocketMQ's warm-up):
    fallocate leaves unwritten extents, and converting them makes every later fdatasync commit
    the journal. Runs in the allocator thread; os.pwrite releases the GIL."""
    done = 0
    while done < length:
        done += os.pwrite(fd, memoryview(_ZEROS)[:min(len(_ZEROS), length - done)], start + done)
    os.fdatasync(fd)


def _allocated_prefix(fd: int, size: int) -> int:
    """Bytes from the start of an existing file known to have disk blocks: up to its first hole.
    A file system may report allocated-but-unwritten blocks as a hole; that only makes the
    writer allocate them again (a no-op), never write to a hole."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), size)
    except OSError:
        return 0


class AllocationFaults:
    """Test hook: while `enospc` is set, every new file allocation fails with ENOSPC."""

    enospc: bool = False

    @classmethod
    def check(cls) -> None:
        if cls.enospc:
            raise OSError(errno.ENOSPC, "simulated: no space left on device")


_FOLIO_MAX = 2 << 20  # the largest page-cache folio a fault may map at once (a PMD, on x86-64)
NEAR_UNMAP_BYTES = 8 << 20  # read through near_write_view before its pages are unmapped together


class Segment:
    __slots__ = ("_grow_lock", "_mm", "_near", "_near_from", "_near_mm", "allocated", "fd", "newest_timestamp",
                 "path", "size", "start", "view")

    def __init__(self, path: Path, start: int, fd: int, size: int, allocated: int) -> None:
        self.path = path
        self.start = start
        self.size = size
        self.fd = fd
        # bytes from the start backed by disk blocks (and, in sync mode, by written zeros);
        # nothing is ever written at or above it
        self.allocated = allocated
        self._grow_lock = threading.Lock()
        self._mm = mmap.mmap(fd, size)  # no MAP_POPULATE: CPython holds the GIL through mmap()
        self.view = memoryview(self._mm)
        self._near: memoryview | None = None  # near_write_view's mapping, made on first use
        self._near_mm: mmap.mmap | None = None
        self._near_from = -1  # where the pages read through it and not yet unmapped start
        self.newest_timestamp = -1  # store timestamp of the newest entry, -1 when unknown/empty

    @property
    def end(self) -> int:
        return self.start + self.size

    @classmethod
    def create(cls, directory: Path, start: int, size: int, prezero: bool = False,
               first: int = ALLOCATE_STEP) -> Segment:
        """Create a segment of `size` bytes (sparse) with its first `first` bytes allocated (and
        zero-filled in sync mode); raises StorageFull on ENOSPC."""
        path = directory / segment_name(start)
        tmp = directory / (segment_name(start) + ".alloc")
        fd = -1
        allocated = min(first, size)
        try:
            AllocationFaults.check()
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, allocated)
            if prezero:
                write_zeros(fd, 0, allocated)
            os.rename(tmp, path)
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            tmp.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFull(f"cannot allocate commitlog segment {path.name}: {exc}") from exc
            raise
        return cls(path, start, fd, size, allocated)

    @classmethod
    def open(cls, path: Path) -> Segment:
        fd = os.open(path, os.O_RDWR)
        size = os.fstat(fd).st_size
        return cls(path, int(path.name), fd, size, _allocated_prefix(fd, size))

    def grow(self, upto: int, prezero: bool) -> None:
        """Back the segment with disk blocks up to `upto` (zero-filled in sync mode); raises
        StorageFull on ENOSPC. Growers take turns, so zeros are never written over bytes a
        writer put below a frontier another grower just moved. Without zeros it is one
        posix_fallocate (allocating in steps while the segment was written cost 12% of appends);
        zeros are written ALLOCATE_STEP at a time, the frontier moving after each, so a writer
        that needs space waits for one step, never for a whole segment's zeros."""
        upto = min(upto, self.size)
        while True:
            with self._grow_lock:
                start = self.allocated
                if upto <= start or self.fd < 0:
                    return
                end = min(upto, start + ALLOCATE_STEP) if prezero else upto
                try:
                    AllocationFaults.check()
                    os.posix_fallocate(self.fd, start, end - start)
                    if prezero:
                        write_zeros(self.fd, start, end - start)
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise StorageFull(f"cannot grow commitlog segment {self.path.name}: {exc}") from exc
                    raise
                self.allocated = end

    def nonzero(self, local: int, stop: int) -> bool:
        """Is any byte of [local, stop) not zero? Read through the file, not the mapping, so an
        empty 1 GiB segment checked at start-up does not become resident."""
        position = local
        while position < stop:
            chunk = os.pread(self.fd, min(len(_ZEROS), stop - position), position)
            if not chunk:
                return False
            if chunk.count(0) != len(chunk):
                return True
            position += len(chunk)
        return False

    def zero_from(self, local: int) -> bool:
        """Overwrite anything but zeros in [local, allocated) with zeros, through the file (not
        the mapping: reading 1 GiB through it made every page resident); True if it did."""
        changed = False
        position, end = local, self.allocated
        while position < end:
            n = min(len(_ZEROS), end - position)
            chunk = os.pread(self.fd, n, position)
            if chunk.count(0) != len(chunk):
                os.pwrite(self.fd, memoryview(_ZEROS)[:len(chunk)], position)
                changed = True
            position += max(len(chunk), 1)
        if changed:
            os.fdatasync(self.fd)
        return changed

    def flush(self) -> None:
        os.fdatasync(self.fd)

    def find(self, sub: bytes, start: int, end: int) -> int:
        """Lowest local offset in [start, end) where `sub` starts, -1 if none (recovery's resync)."""
        return self._mm.find(sub, start, end) if self._mm is not None else -1

    def near_write_view(self) -> memoryview:
        """A second mapping of the file with readahead off (MADV_RANDOM), to read bytes just
        written near the write position (a piped batch's CRC, store/piped.py). A fault through
        `view` there reads ahead into blocks not yet written, and the kernel zero-fills every
        page it reads so: in a probe, 70% of the broker's CPU, as each write moved the window on.
        Faults here map the written pages only (and their cached neighbours, fault-around);
        `unmap_near` takes them out again once read."""
        near = self._near
        if near is None:
            mm = self._near_mm = mmap.mmap(self.fd, self.size)
            mm.madvise(mmap.MADV_RANDOM)
            near = self._near = memoryview(mm)
        return near

    def unmap_near(self, local: int, n: int) -> None:
        """[local, local+n) was read through near_write_view's mapping: unmap what it mapped
        (MADV_DONTNEED: the pages stay in the page cache) once NEAR_UNMAP_BYTES have gathered,
        with a large folio's worth either side. Left mapped, every byte written stayed mapped
        twice: the broker's RSS grew by all it wrote (6.5 GB in a benchmark phase) and reclaim
        had two mappings to undo. A fault maps the whole (large) folio it falls in, which may
        start before `local`: unmapping just each range read left 168 MB of 600 MB written
        mapped. One call per batch cost more than the copy splicing saves at 256 KiB batches."""
        start = self._near_from
        if start < 0 or local < start:
            start = self._near_from = local
        if local + n - start >= NEAR_UNMAP_BYTES:
            begin = max(start - _FOLIO_MAX, 0) & ~(mmap.PAGESIZE - 1)
            end = min(local + n + _FOLIO_MAX, self.size)
            self._near_mm.madvise(mmap.MADV_DONTNEED, begin, end - begin)
            self._near_from = local + n

    def drop(self, unlink: bool) -> None:
        """Forget the file; the mapping lives on until the last reader's view is gone."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self._near = self._near_mm = None
        self.view = memoryview(b"")
        self._mm = None
        if unlink:
            self.path.unlink(missing_ok=True)
