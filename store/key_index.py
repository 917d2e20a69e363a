"""Key index (MetaQ 7.4.3 / RocketMQ IndexFile): find records by key within a time range.

Owns the index files `<data_dir>/index/<20-digit sequence>` (format version 1): a header,
a hash-slot table and chained entries, filled in store-timestamp order, a new file when one
is full. Lookups return candidates only: the caller checks each against the real key in
the commitlog, so hash collisions never leak. Never reads the commitlog itself.

Layout, little-endian (see docs/storage.md):
  header 48 bytes: magic u32 "GKIX" | version u16 | reserved u16 | slot_count u32 |
                   capacity u32 | count u32 | reserved u32 | begin_ts i64 | end_ts i64 |
                   last_position i64
  slots: slot_count x u32   entry number + 1 of the newest entry in the slot, 0 = empty
  entries: capacity x 32 bytes: key_hash u64 | batch_position i64 | store_ts i64 |
                   offset_delta u32 | prev u32 (entry number + 1 of the previous entry in
                   the chain, 0 = end)
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from store.errors import CorruptEntry, StorageFull
from store.segment import sync_mapping

MAGIC = 0x58494B47
FORMAT_VERSION = 1
HEADER = struct.Struct("<IHHIIIIqqq")
KEY_ENTRY = np.dtype([("hash", "<u8"), ("pos", "<i8"), ("ts", "<i8"), ("delta", "<u4"),
                      ("prev", "<u4")])


class IndexFile:
    def __init__(self, path: Path, mm: mmap.mmap) -> None:
        self.path = path
        self.mm = mm
        (magic, version, _, self.slot_count, self.capacity, self.count, _, self.begin_ts,
         self.end_ts, self.last_position) = HEADER.unpack_from(mm, 0)
        if magic != MAGIC or version != FORMAT_VERSION:
            raise CorruptEntry(f"{path} is not a key index file")
        if len(mm) != self.file_size(self.slot_count, self.capacity) or self.count > self.capacity:
            raise CorruptEntry(f"{path} has the wrong size")
        self.slots = np.frombuffer(mm, "<u4", self.slot_count, HEADER.size)
        self.entries = np.frombuffer(mm, KEY_ENTRY, self.capacity, HEADER.size + 4 * self.slot_count)

    @staticmethod
    def file_size(slots: int, capacity: int) -> int:
        return HEADER.size + 4 * slots + KEY_ENTRY.itemsize * capacity

    @classmethod
    def create(cls, path: Path, slots: int, capacity: int) -> IndexFile:
        size = cls.file_size(slots, capacity)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)  # never SIGBUS on a full disk: fail here instead
            mm = mmap.mmap(fd, size)
            mm.madvise(mmap.MADV_RANDOM)
        except OSError as exc:
            path.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFull(f"cannot create key index file {path}: {exc}") from exc
            raise
        finally:
            os.close(fd)
        HEADER.pack_into(mm, 0, MAGIC, FORMAT_VERSION, 0, slots, capacity, 0, 0, -1, -1, -1)
        return cls(path, mm)

    @classmethod
    def load(cls, path: Path) -> IndexFile:
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, os.fstat(fd).st_size)
        except ValueError as exc:
            raise CorruptEntry(f"{path} is empty") from exc
        finally:
            os.close(fd)
        return cls(path, mm)

    @property
    def full(self) -> bool:
        return self.count >= self.capacity

    def add(self, key_hash: int, position: int, store_ts: int, offset_delta: int) -> None:
        slot = key_hash % self.slot_count
        n = self.count
        self.entries[n] = (key_hash, position, store_ts, offset_delta, self.slots[slot])
        self.slots[slot] = n + 1
        self.count = n + 1
        if self.begin_ts < 0:
            self.begin_ts = store_ts
        self.end_ts = store_ts
        self.last_position = position
        self._write_header()

    def add_many(self, hashes: np.ndarray, positions: np.ndarray, stamps: np.ndarray, deltas: np.ndarray) -> None:
        """`add` for many entries at once (they must fit), with numpy: each entry's chain link
        is the slot's head before it, or the previous entry of this call in the same slot."""
        n = len(hashes)
        first_number = self.count + 1
        numbers = np.arange(first_number, first_number + n, dtype=np.uint32)  # entry number + 1
        slots = (hashes % np.uint64(self.slot_count)).astype(np.intp)
        order = np.argsort(slots, kind="stable")  # same slot: in entry order
        sorted_slots, sorted_numbers = slots[order], numbers[order]
        starts = np.ones(n, dtype=bool)
        starts[1:] = sorted_slots[1:] != sorted_slots[:-1]
        prev_sorted = np.empty(n, dtype=np.uint32)
        prev_sorted[starts] = self.slots[sorted_slots[starts]]
        later = np.flatnonzero(~starts)
        prev_sorted[later] = sorted_numbers[later - 1]
        entries = self.entries[self.count:self.count + n]
        entries["hash"] = hashes
        entries["pos"] = positions
        entries["ts"] = stamps
        entries["delta"] = deltas
        entries["prev"][order] = prev_sorted
        ends = np.ones(n, dtype=bool)
        ends[:-1] = starts[1:]
        self.slots[sorted_slots[ends]] = sorted_numbers[ends]  # heads after the entries they point at
        self.count += n
        if self.begin_ts < 0:
            self.begin_ts = int(stamps[0])
        self.end_ts = int(stamps[-1])
        self.last_position = int(positions[-1])
        self._write_header()

    def _write_header(self) -> None:
        HEADER.pack_into(self.mm, 0, MAGIC, FORMAT_VERSION, 0, self.slot_count, self.capacity,
                         self.count, 0, self.begin_ts, self.end_ts, self.last_position)

    def truncate(self, count: int) -> None:
        """Keep only the first `count` entries (recovery: those a checkpoint made durable).
        Slot heads are recomputed from those entries, whose chain links are durable too,
        since a slot page may have reached the disk ahead of the entries it points at."""
        if not 0 <= count <= self.capacity:
            raise CorruptEntry(f"{self.path}: {count} entries checkpointed, capacity {self.capacity}")
        entries = self.entries[:count]
        if np.any(entries["prev"] > np.arange(count, dtype=np.uint32)):
            raise CorruptEntry(f"{self.path}: a chain link points forward")
        heads = np.zeros(self.slot_count, dtype=np.uint32)
        np.maximum.at(heads, (entries["hash"] % np.uint64(self.slot_count)).astype(np.intp),
                      np.arange(1, count + 1, dtype=np.uint32))
        self.slots[:] = heads
        self.count = count
        self.begin_ts = int(entries["ts"][0]) if count else -1
        self.end_ts = int(entries["ts"][-1]) if count else -1
        self.last_position = int(entries["pos"][-1]) if count else -1
        self._write_header()

    def candidates(self, key_hash: int, begin_ts: int, end_ts: int) -> Iterator[tuple[int, int]]:
        """(batch position, offset delta) of entries with this hash in [begin_ts, end_ts], newest first."""
        i = int(self.slots[key_hash % self.slot_count])
        while 0 < i <= self.count:
            e = self.entries[i - 1]
            ts = int(e["ts"])
            if ts < begin_ts:
                return
            if int(e["hash"]) == key_hash and ts <= end_ts:
                yield int(e["pos"]), int(e["delta"])
            prev = int(e["prev"])
            if prev >= i:
                return  # corrupt chain; never loop
            i = prev


class KeyIndex:
    def __init__(self, directory: Path, slots: int, capacity: int) -> None:
        self.directory = directory
        self.slots = slots
        self.capacity = capacity
        directory.mkdir(parents=True, exist_ok=True)
        self.files = [IndexFile.load(p) for p in sorted(directory.iterdir()) if p.name.isdigit()]

    @classmethod
    def fresh(cls, directory: Path, slots: int, capacity: int) -> KeyIndex:
        shutil.rmtree(directory, ignore_errors=True)
        return cls(directory, slots, capacity)

    def reserve(self, count: int) -> None:
        """Make room for `count` more entries before anything is written: creating the next
        file is where a full disk shows (StorageFull)."""
        if not self.files or self.files[-1].count + count > self.files[-1].capacity:
            self._next_file()

    def _next_file(self) -> None:
        seq = int(self.files[-1].path.name) + 1 if self.files else 0
        self.files.append(IndexFile.create(self.directory / f"{seq:020d}", self.slots, self.capacity))

    def add(self, key_hash: int, position: int, store_ts: int, offset_delta: int) -> None:
        if not self.files or self.files[-1].full:
            self._next_file()
        self.files[-1].add(key_hash, position, store_ts, offset_delta)

    def add_many(self, hashes: np.ndarray, positions: np.ndarray, stamps: np.ndarray, deltas: np.ndarray) -> None:
        """Add entries in order. Every file they need is created first, so a full disk
        (StorageFull) stops the call before any entry is written."""
        n = len(hashes)
        room = self.files[-1].capacity - self.files[-1].count if self.files else 0
        targets = [self.files[-1]] if room else []
        needed = -(-max(0, n - room) // self.capacity)
        for _ in range(needed):
            self._next_file()
            targets.append(self.files[-1])
        at = 0
        for f in targets:
            take = min(n - at, f.capacity - f.count)
            f.add_many(hashes[at:at + take], positions[at:at + take], stamps[at:at + take], deltas[at:at + take])
            at += take

    def candidates(self, key_hash: int, begin_ts: int, end_ts: int) -> Iterator[tuple[int, int]]:
        for f in reversed(self.files):
            if f.count == 0 or f.end_ts < begin_ts:
                break
            if f.begin_ts <= end_ts:
                yield from f.candidates(key_hash, begin_ts, end_ts)

    def mark(self) -> tuple[int, int]:
        """(sequence of the last file, its entry count), or (-1, 0) without files: a checkpoint's
        record of how far the index goes."""
        if not self.files:
            return -1, 0
        last = self.files[-1]
        return int(last.path.name), last.count

    def truncate(self, mark: tuple[int, int]) -> None:
        """Go back to a checkpoint's mark: later files are removed, the last one cut to its count."""
        seq, count = mark
        while self.files and int(self.files[-1].path.name) > seq:
            self.files.pop().path.unlink(missing_ok=True)
        if seq < 0:
            return
        if not self.files or int(self.files[-1].path.name) != seq:
            raise CorruptEntry(f"key index file {seq} named by the checkpoint is missing")
        self.files[-1].truncate(count)

    def truncate_from(self, position: int) -> None:
        """Drop every entry pointing at `position` or later (the commitlog was cut back there);
        entries are in position order."""
        while self.files:
            last = self.files[-1]
            kept = int(np.searchsorted(last.entries["pos"][:last.count], position))
            if kept or len(self.files) == 1:
                last.truncate(kept)
                return
            self.files.pop().path.unlink(missing_ok=True)

    def drop_below(self, min_position: int) -> None:
        """Unlink files whose every entry points at deleted commitlog segments."""
        while len(self.files) > 1 and self.files[0].last_position < min_position:
            self.files.pop(0).path.unlink(missing_ok=True)

    def flush(self) -> None:
        for f in list(self.files):  # a copy: retention may drop a file meanwhile
            sync_mapping(f.mm)
