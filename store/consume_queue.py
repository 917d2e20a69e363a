"""Consume queue of one topic-partition: fixed 20-byte entries, one per logical offset.

Owns the queue files `<dir>/<20-digit first offset>` (each holds `per_file` entries, file k
covers offsets [k*per_file, (k+1)*per_file)), their numpy views over mmap, and the
queue's log start offset and high watermark. Every record of a batch gets an entry that
points at the whole batch. Never reads the commitlog and never fsyncs on the append path.

Entry layout, little-endian, packed (see docs/storage.md):
  0 i64 position   commitlog position of the batch bytes
  8 i32 size       batch size in bytes (0 = no entry, -1 = corrupt: the batch failed its CRC)
 12 i64 tag_hash   hash of the record's tag header value, 0 when none
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import struct
import threading
from pathlib import Path

import numpy as np

from store.errors import CorruptEntry, StorageFull
from store.segment import sync_mapping
from store.transactions import ABORTED_INDEX

QUEUE_ENTRY = np.dtype([("pos", "<i8"), ("size", "<i4"), ("tag", "<i8")])
ENTRY_SIZE = QUEUE_ENTRY.itemsize  # 20
_ENTRY = struct.Struct("<qiq")  # the same layout, for writing untagged entries (see put)
_POS_SIZE = struct.Struct("<qi")  # an entry's first two fields, for reading (see entry)
CORRUPT = -1  # size of an offset whose batch is damaged; position still orders it
RESERVE_ENTRIES = 4096  # queue entries backed by disk blocks ahead of the writer (80 KiB)
FIRST_RESERVE_ENTRIES = 4096 // ENTRY_SIZE  # backed when a queue is made: one page (204 entries)


def _map(path: Path, size: int, create: bool) -> np.ndarray:
    fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    try:
        if create:
            os.ftruncate(fd, size)
        elif os.fstat(fd).st_size != size:
            raise CorruptEntry(f"consume queue file {path} has the wrong size")
        mm = mmap.mmap(fd, size)
        mm.madvise(mmap.MADV_RANDOM)  # no readahead: a first touch must not fault in megabytes
    finally:
        os.close(fd)
    return np.frombuffer(mm, dtype=QUEUE_ENTRY)


def _allocate(path: Path, start: int, length: int) -> None:
    """Back a byte range of a sparse queue file with real blocks: a store to an unbacked page
    of a mapping on a full file system is SIGBUS, which would kill the broker."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, start, length)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageFull(f"cannot grow consume queue file {path}: {exc}") from exc
        raise
    finally:
        os.close(fd)


def _mmap_of(arr: np.ndarray) -> mmap.mmap:
    base = arr.base
    return base.obj if isinstance(base, memoryview) else base


class ConsumeQueue:
    # slots: with 10,000 queues an append's attribute reads miss the CPU cache, and a
    # per-instance __dict__ is one more object to miss on
    __slots__ = (
        "_cur",
        "_cur_bytes",
        "_cur_index",
        "_low",
        "_read",
        "_reserve_lock",
        "closed",
        "directory",
        "files",
        "high_watermark",
        "log_start",
        "per_file",
        "refill_at",
        "reserve_requested",
        "reserved",
    )

    def __init__(self, directory: Path, per_file: int) -> None:
        self.directory = directory
        self.per_file = per_file
        self.files: dict[int, np.ndarray] = {}
        self.log_start = 0
        self.high_watermark = 0
        self._cur_index = -1
        self._cur: np.ndarray | None = None
        self._cur_bytes: memoryview | None = None  # the bytes of _cur, for put
        self._read: tuple[np.ndarray | None, memoryview | None] = (None, None)  # the file entry read last, its bytes
        self.reserved = 0  # entries below this offset have disk blocks (see reserve)
        # A writer past refill_at asks the reserver thread (store/reserver.py) to reserve
        # ahead, while half a reservation, or half a file, is still left.
        self._low = min(RESERVE_ENTRIES, per_file) // 2
        self.refill_at = -1
        # the reserver has this queue in its list: `reserved` as the request saw it, else -1
        self.reserve_requested = -1
        self._reserve_lock = threading.Lock()  # the append path and the reserver thread
        self.closed = False  # deleted: the reserver must not create files for it again

    @classmethod
    def create(cls, directory: Path, per_file: int, first_offset: int = 0) -> ConsumeQueue:
        """A new empty queue whose next offset is `first_offset`; its first file exists at once."""
        directory.mkdir(parents=True, exist_ok=True)
        q = cls(directory, per_file)
        q.log_start = q.high_watermark = first_offset
        # Its first page gets disk blocks here, where queues are made off the event loop
        # (CreateTopics, a follower's state record, recovery), not on the first append, which
        # would wait for the disk on the loop: 10,000 new partitions are 10,000 fallocate calls.
        # One page, not a whole reservation: a partition never written costs 4 KiB of disk.
        # The first append asks the reserver thread for the rest (refill_at).
        q._reserve(first_offset, 1, ahead=FIRST_RESERVE_ENTRIES)
        index = first_offset // per_file
        q._use(index, q.files[index])  # and its first put takes put's quick path
        return q

    @classmethod
    def load(cls, directory: Path, per_file: int) -> ConsumeQueue:
        """Map the existing files; raises CorruptEntry if the directory is not a sane queue."""
        if not directory.is_dir():
            raise CorruptEntry(f"consume queue {directory} is missing")
        q = cls(directory, per_file)
        for path in directory.iterdir():
            if path.name.startswith(ABORTED_INDEX):  # the partition's aborted-transactions index
                continue
            if not path.name.isdigit() or int(path.name) % per_file:
                raise CorruptEntry(f"unexpected consume queue file {path}")
            q.files[int(path.name) // per_file] = _map(path, per_file * ENTRY_SIZE, create=False)
        if not q.files:
            raise CorruptEntry(f"consume queue {directory} has no files")
        return q

    def _file(self, index: int, create: bool) -> np.ndarray | None:
        arr = self.files.get(index)
        if arr is None and create:
            path = self.directory / f"{index * self.per_file:020d}"
            arr = self.files[index] = _map(path, self.per_file * ENTRY_SIZE, create=True)
        return arr

    # ---- writing -----------------------------------------------------------------------
    def reserve(self, offset: int, count: int) -> None:
        """Make sure entries [offset, offset+count) have disk blocks before anything is
        written; raises StorageFull (having written nothing) when the disk is full."""
        with self._reserve_lock:
            self._reserve(offset, count)

    def reserve_ahead(self, seen: int) -> None:
        """Extend the reservation by RESERVE_ENTRIES (or to the end of its file), creating the
        next file when the reservation ends with the current one. For the reserver thread:
        the writer keeps writing below `reserved` meanwhile. `seen` is `reserved` when the
        request was made: if the writer has reserved for itself since, the request is stale."""
        with self._reserve_lock:
            if not self.closed and self.reserved == seen:
                self._reserve(self.reserved, 1)

    def _reserve(self, offset: int, count: int, ahead: int = RESERVE_ENTRIES) -> None:
        stop = offset + count
        if stop <= self.reserved:
            return
        at = max(self.reserved, offset)
        while at < stop:
            index, slot = divmod(at, self.per_file)
            self._file(index, create=True)
            end = min(self.per_file, max(stop - index * self.per_file, slot + ahead))
            _allocate(self.directory / f"{index * self.per_file:020d}", slot * ENTRY_SIZE,
                      (end - slot) * ENTRY_SIZE)
            at = index * self.per_file + end
        self.refill_at = at - self._low  # before `reserved`: a writer reads that one first
        self.reserved = at

    def ensure(self, offset: int, count: int) -> None:
        """Entries [offset, offset+count) below the reservation get disk blocks, their files
        created if missing: a relocated batch (the log cleaner's) met in a rebuild may lie
        below every offset derived so far."""
        with self._reserve_lock:
            if offset + count > self.reserved:
                self._reserve(offset, count)
            for _, slot, first, n in self._spans(offset, min(offset + count, self.reserved)):
                index = first // self.per_file
                if index not in self.files:
                    self._file(index, create=True)
                    _allocate(self.directory / f"{index * self.per_file:020d}", slot * ENTRY_SIZE, n * ENTRY_SIZE)

    def put(self, offset: int, count: int, position: int, size: int) -> None:
        """Point `count` entries from `offset` at one batch; tag hash 0."""
        index, slot = divmod(offset, self.per_file)
        if index == self._cur_index and slot + count <= self.per_file:
            # One assignment either way. struct over the raw bytes costs 0.1 us where numpy's
            # structured-array assignment costs 0.6 us, the largest part of an append after
            # the commitlog copy; N records get N copies of the entry in one slice assignment.
            if count == 1:
                _ENTRY.pack_into(self._cur_bytes, slot * ENTRY_SIZE, position, size, 0)
            else:
                self._cur_bytes[slot * ENTRY_SIZE:(slot + count) * ENTRY_SIZE] = \
                    _ENTRY.pack(position, size, 0) * count
        else:
            self._put_spanning(offset, count, position, size, None)

    def put_tagged(self, offset: int, count: int, position: int, size: int, tags: np.ndarray) -> None:
        index, slot = divmod(offset, self.per_file)
        if index == self._cur_index and slot + count <= self.per_file:
            block = np.empty(count, QUEUE_ENTRY)
            block["pos"] = position
            block["size"] = size
            block["tag"] = tags
            self._cur[slot:slot + count] = block
        else:
            self._put_spanning(offset, count, position, size, tags)

    def _put_spanning(self, offset: int, count: int, position: int, size: int,
                      tags: np.ndarray | None) -> None:
        done = 0
        while done < count:
            index, slot = divmod(offset + done, self.per_file)
            arr = self._file(index, create=True)
            n = min(count - done, self.per_file - slot)
            block = np.empty(n, QUEUE_ENTRY)
            block["pos"] = position
            block["size"] = size
            block["tag"] = 0 if tags is None else tags[done:done + n]
            arr[slot:slot + n] = block
            self._use(index, arr)
            done += n

    def _use(self, index: int, arr: np.ndarray) -> None:
        """File `index` is the one put writes to without looking it up."""
        self._cur_index, self._cur = index, arr
        self._cur_bytes = memoryview(arr.view(np.uint8))

    def clear_after(self, offset: int) -> None:
        """Remove the entries from `offset` on that a crash left behind (written after the last
        checkpoint, for batches recovery did not find again). In the file holding `offset` they
        run contiguously, so zeroing stops at the first empty entry; later files hold nothing
        else and are deleted."""
        index, slot = divmod(offset, self.per_file)
        for later in sorted(i for i in self.files if i > index):
            self.files.pop(later)
            (self.directory / f"{later * self.per_file:020d}").unlink(missing_ok=True)
        arr = self.files.get(index)
        while arr is not None and slot < self.per_file:
            sizes = arr["size"][slot:slot + 4096]
            empty = np.flatnonzero(sizes == 0)
            stop = int(empty[0]) if len(empty) else len(sizes)
            if stop:
                arr[slot:slot + stop] = np.zeros(stop, QUEUE_ENTRY)
            if len(empty):
                break
            slot += stop
        self._cur_index = -1  # the next put looks its file up afresh

    def mark_corrupt(self, start: int, stop: int, position: int | None = None) -> None:
        """Make offsets [start, stop) read as corrupt. With `position` they are new entries
        (recovery found no batch for them); without, existing entries keep their position."""
        offset = start
        while offset < stop:
            index, slot = divmod(offset, self.per_file)
            arr = self._file(index, create=True)
            n = min(stop - offset, self.per_file - slot)
            if position is not None:
                arr[slot:slot + n] = [(position, CORRUPT, 0)]
            else:
                arr["size"][slot:slot + n] = CORRUPT
            offset += n

    def corrupt_until(self, offset: int) -> int:
        """The first offset at or after `offset` (below the high watermark) not marked corrupt."""
        while offset < self.high_watermark and self.entry(offset)[1] == CORRUPT:
            offset += 1
        return offset

    # ---- reading -----------------------------------------------------------------------
    def entry(self, offset: int) -> tuple[int, int]:
        """(commitlog position, batch size) of the batch holding `offset`; size 0 if none.

        struct over the file's bytes: numpy's structured-array element and field reads cost
        0.7 us, struct 0.07 us (one lookup per partition of a fetch, one per batch it returns).
        The bytes are cached for the file read last, checked against `files` on every call (one
        tuple, replaced whole: other threads read entries too), so a file removed or mapped
        again is never read through a stale view."""
        index, slot = divmod(offset, self.per_file)
        arr = self.files.get(index)
        if arr is None:
            return 0, 0
        read = self._read
        if read[0] is not arr:
            read = self._read = (arr, memoryview(arr.view(np.uint8)))
        return _POS_SIZE.unpack_from(read[1], slot * ENTRY_SIZE)

    def entries(self, start: int, stop: int) -> np.ndarray:
        """Entries for offsets [start, stop): a view inside one file, else a copy."""
        parts = []
        offset = start
        while offset < stop:
            index, slot = divmod(offset, self.per_file)
            n = min(stop - offset, self.per_file - slot)
            arr = self.files.get(index)
            parts.append(arr[slot:slot + n] if arr is not None else np.zeros(n, QUEUE_ENTRY))
            offset += n
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, QUEUE_ENTRY)

    def _spans(self, start: int, stop: int):
        """(file array or None, slot, first offset, count) covering offsets [start, stop)."""
        offset = start
        while offset < stop:
            index, slot = divmod(offset, self.per_file)
            n = min(stop - offset, self.per_file - slot)
            yield self.files.get(index), slot, offset, n
            offset += n

    def next_live(self, offset: int, stop: int) -> int:
        """The first offset in [offset, stop) with an entry (size != 0), else stop: a compacted
        queue's gaps are skipped with numpy, a file at a time."""
        for arr, slot, first, n in self._spans(offset, stop):
            if arr is not None:
                hits = np.flatnonzero(arr["size"][slot:slot + n])
                if len(hits):
                    return first + int(hits[0])
        return stop

    def count_live(self, start: int, stop: int) -> int:
        """Offsets in [start, stop) with an entry (without copying the entries)."""
        return sum(int(np.count_nonzero(arr["size"][slot:slot + n]))
                   for arr, slot, _, n in self._spans(start, stop) if arr is not None)

    def live(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, positions, sizes) of the offsets in [start, stop) with an entry."""
        offsets, positions, sizes = [], [], []
        for arr, slot, first, n in self._spans(start, stop):
            if arr is None:
                continue
            block = arr[slot:slot + n]
            hits = np.flatnonzero(block["size"])
            offsets.append(hits + first)
            positions.append(block["pos"][hits])
            sizes.append(block["size"][hits])
        if not offsets:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
        return np.concatenate(offsets), np.concatenate(positions), np.concatenate(sizes)

    def repoint(self, offsets: np.ndarray, old_position: int, position: int, size: int,
                tags: np.ndarray | None = None) -> int:
        """Point the entries of `offsets` (ascending) that still point at `old_position` (-1:
        whatever they point at) at the batch at `position` (size 0: remove them, a gap).
        Returns how many changed. The log cleaner's step (store/compaction.py); entries are
        changed one file at a time, each in one numpy assignment, so a reader sees an entry's
        old or new value, never a mix (both under the GIL)."""
        changed = 0
        per_file = self.per_file
        files = offsets // per_file
        for index in np.unique(files):
            arr = self.files.get(int(index))
            if arr is None:
                continue
            pick = files == index
            slots = offsets[pick] - int(index) * per_file
            new_tags = 0 if tags is None or not size else tags[pick]
            if old_position >= 0:
                still = arr["pos"][slots] == old_position
                slots = slots[still]
                if tags is not None and size:
                    new_tags = new_tags[still]
            if not len(slots):
                continue
            block = arr[slots]
            block["pos"] = position if size else 0
            block["size"] = size
            block["tag"] = new_tags
            arr[slots] = block
            changed += len(slots)
        return changed

    def first_offset_at_or_after(self, position: int) -> int:
        """Smallest offset in [log_start, hw) whose batch starts at or after `position`
        (positions grow with offsets); hw if none."""
        lo, hi = self.log_start, self.high_watermark
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[0] >= position:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # ---- maintenance -------------------------------------------------------------------
    def advance_log_start(self, offset: int) -> None:
        """Move the log start forward and unlink files wholly below it."""
        if offset <= self.log_start:
            return
        self.log_start = offset
        for index in sorted(self.files):
            if (index + 1) * self.per_file <= offset and index != self._cur_index:
                del self.files[index]
                (self.directory / f"{index * self.per_file:020d}").unlink(missing_ok=True)

    def forget_below(self, position: int, advance: bool) -> int:
        """Remove the entries in [log start, high watermark) that point below commitlog
        `position` (retention deleted their segment); a compacted queue's positions are not in
        offset order, so every entry is checked. With `advance` (a topic retention deletes
        from, compact,delete) the log start moves to the first remaining entry, as Kafka's
        moves to the first remaining segment; else only when none remains. Returns how many
        went."""
        offsets, positions, _ = self.live(self.log_start, self.high_watermark)
        gone = offsets[positions < position]
        changed = self.repoint(gone, -1, 0, 0) if len(gone) else 0
        first = self.next_live(self.log_start, self.high_watermark)
        if advance or first == self.high_watermark:
            self.advance_log_start(first)
        return changed

    def flush(self) -> None:
        for arr in list(self.files.values()):  # a copy: retention may drop a file meanwhile
            sync_mapping(_mmap_of(arr))

    def delete(self) -> None:
        # Store.delete_topic has set `closed` already, under the append lock (not this one:
        # the reserver holds this one through disk work). Taking it here waits out a
        # reservation in progress, so no file is created after the directory is removed.
        with self._reserve_lock:
            self.closed = True
        self.files.clear()
        self._cur = self._cur_bytes = None
        self._read = (None, None)
        shutil.rmtree(self.directory, ignore_errors=True)
