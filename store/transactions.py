"""The transactions of one partition: which producers have one open, from which offset, and the
aborted-transactions index (Kafka's ongoing transactions of ProducerStateManager, and its
.txnindex).

Derived, as the consume queue is: the dispatcher (store/dispatch.py's `to_transactions`) hands
it the transactional and control batches of the partition in offset order. The open
transactions live in memory and in the checkpoint; the aborted index is the file
`consumequeue/<topic>/<partition>/aborted` beside the queue files, made durable with the
checkpoints like them (docs/storage.md, *Transactions*). Never reads the commitlog.

Entry layout, little-endian, packed (format version 1):
  0 i64 producer_id
  8 i64 first    offset of the transaction's first batch in this partition
 16 i64 last     offset of its ABORT marker
Entries are in marker order; the file is backed with disk blocks ahead of the writer (zeros
there: `first < last` holds for every real entry, so the first entry that breaks it ends the
index).
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import numpy as np

from store.atomic_file import fsync_dir
from store.errors import StorageFull

log = logging.getLogger(__name__)
ABORTED = np.dtype([("producer_id", "<i8"), ("first", "<i8"), ("last", "<i8")])
ENTRY_SIZE = ABORTED.itemsize  # 24
ABORTED_INDEX = "aborted"  # the file's name in the partition's queue directory
RESERVE_ENTRIES = 256  # entries backed by disk blocks ahead of the writer (6 KiB)


class Transactions:
    __slots__ = ("_buf", "_generation", "_reserved", "aborted", "completing", "dirty", "first_open", "open",
                 "path")

    def __init__(self, directory: Path) -> None:
        self.path = directory / ABORTED_INDEX
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.first_open: int | None = None  # min(open.values())
        # (first offset, marker offset) of transactions whose marker lies at or above a high
        # watermark that is not the log end (replication): they hold the last stable offset
        # until it passes the marker, as Kafka's unreplicated transactions do
        self.completing: list[tuple[int, int]] = []
        self._buf = np.zeros(16, ABORTED)
        # the index, oldest marker first: replaced, never changed in place, so a reader takes it once
        self.aborted = self._buf[:0]
        self._reserved = 0  # entries the file has disk blocks for
        self._generation = 0  # moved when the index is cut or reset (not when it grows)
        self.dirty = False  # written since the last flush

    @classmethod
    def load(cls, directory: Path) -> Transactions:
        """The index as its file holds it (an absent file: empty). Stops at the first entry that
        is not one (zeros past the end, bytes a crash left), or that is not after the one before."""
        txns = cls(directory)
        (directory / (ABORTED_INDEX + ".tmp")).unlink(missing_ok=True)  # a rewrite a crash cut short
        try:
            raw = txns.path.read_bytes()
        except FileNotFoundError:
            return txns
        txns._reserved = len(raw) // ENTRY_SIZE
        entries = np.frombuffer(raw, ABORTED, count=txns._reserved)
        good = entries["first"] < entries["last"]
        good[1:] &= entries["last"][1:] > entries["last"][:-1]
        bad = np.flatnonzero(~good)
        count = int(bad[0]) if len(bad) else len(entries)
        txns._buf = np.zeros(max(16, 2 * count), ABORTED)
        txns._buf[:count] = entries[:count]
        txns.aborted = txns._buf[:count]
        if entries[count:].view(np.uint8).any():  # what a crash left past the end: never read as entries later
            txns._write(count, bytes((len(entries) - count) * ENTRY_SIZE))
        return txns

    # ---- deriving (under the store's append lock) ----------------------------------------
    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional batch at `offset`: its producer's transaction is open from here
        unless it already was."""
        if producer_id not in self.open:
            self.open[producer_id] = offset
            if self.first_open is None:
                self.first_open = offset

    def end(self, producer_id: int, marker_offset: int, abort: bool, held: bool) -> None:
        """A marker closes the producer's open transaction (none open: nothing happens, as in
        Kafka an empty transaction leaves no trace); an ABORT enters it into the index.
        `held`: the high watermark is below the log end (replication), so the transaction
        holds the last stable offset until the high watermark passes its marker."""
        first = self.open.pop(producer_id, None)
        if first is None:
            return
        if first == self.first_open:
            self.first_open = min(self.open.values(), default=None)
        if held:
            self.completing.append((first, marker_offset))
        if abort:
            self._add(producer_id, first, marker_offset)

    def reserve(self) -> None:
        """Disk blocks for one more index entry, before the marker that may need it is written:
        a full disk is StorageFull with nothing written."""
        count = len(self.aborted)
        if count < self._reserved:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, (count + RESERVE_ENTRIES) * ENTRY_SIZE)
            finally:
                os.close(fd)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFull(f"cannot grow the aborted-transactions index {self.path}: {exc}") from exc
            raise
        self._reserved = count + RESERVE_ENTRIES

    def _add(self, producer_id: int, first: int, last: int) -> None:
        count = len(self.aborted)
        if count == len(self._buf):
            grown = np.zeros(2 * count, ABORTED)
            grown[:count] = self._buf[:count]
            self._buf = grown
        self._buf[count] = (producer_id, first, last)
        self._write(count, self._buf[count:count + 1].tobytes())
        self.aborted = self._buf[:count + 1]

    def _write(self, index: int, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, index * ENTRY_SIZE)
        finally:
            os.close(fd)
        self.dirty = True

    # ---- answers (any thread) -------------------------------------------------------------
    def last_stable(self, log_start: int, high_watermark: int) -> int:
        """Kafka's last stable offset: the first offset of the oldest open transaction (not
        below the log start), or the high watermark if that is lower."""
        first = self.first_open
        pending = [c[0] for c in self.completing if c[1] >= high_watermark]
        if pending:
            first = min(pending) if first is None else min(first, *pending)
        return high_watermark if first is None else min(max(first, log_start), high_watermark)

    def replicated(self, high_watermark: int | None) -> None:
        """The high watermark moved (None: it follows the log end again): forget the completed
        transactions whose marker it passed. Under the append lock."""
        if self.completing:
            self.completing = [] if high_watermark is None else \
                [c for c in self.completing if c[1] >= high_watermark]

    def collect(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions that overlap [start, end):
        their marker at or after `start`, their first offset before `end` (Kafka's
        collectAbortedTransactions), in first-offset order."""
        entries = self.aborted
        hit = entries[int(np.searchsorted(entries["last"], start)):]
        hit = hit[hit["first"] < end]
        hit = hit[np.argsort(hit["first"], kind="stable")]
        return [(int(pid), int(first)) for pid, first in zip(hit["producer_id"], hit["first"])]

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        """Does the batch of `producer_id` at `offset` belong to an aborted transaction?"""
        entries = self.aborted
        hit = entries[int(np.searchsorted(entries["last"], offset, side="right")):]
        return bool(np.any((hit["producer_id"] == producer_id) & (hit["first"] <= offset)))

    @property
    def last_aborted(self) -> int | None:
        """The marker offset of the newest entry (the checkpoint's check on the file)."""
        entries = self.aborted
        return int(entries["last"][-1]) if len(entries) else None

    # ---- recovery and maintenance -----------------------------------------------------------
    def cut(self, end: int) -> None:
        """Forget what a crash or a truncation removed: index entries whose marker is at or after
        `end` (zeroed in the file) and transactions opened there."""
        entries = self.aborted
        keep = int(np.searchsorted(entries["last"], end))
        if keep < len(entries):
            self._write(keep, bytes((len(entries) - keep) * ENTRY_SIZE))
            self._generation += 1
            self.aborted = self._buf[:keep]
        self.open = {pid: first for pid, first in self.open.items() if first < end}
        self.first_open = min(self.open.values(), default=None)
        self.completing = []

    def reset(self) -> None:
        """Empty: the transactions are derived again from the partition's batches."""
        self.cut(-1)

    def restore(self, open_txns: dict[int, int]) -> None:
        """The open transactions a checkpoint saved."""
        self.open = dict(open_txns)
        self.first_open = min(self.open.values(), default=None)

    def flush(self) -> None:
        if not self.dirty:
            return
        self.dirty = False  # before the sync: a write meanwhile marks it again
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # its topic was deleted meanwhile
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def drop_below(self, log_start: int, lock) -> None:
        """Rewrite the file without the entries whose marker lies below the log start (which
        nothing reads any more). The kept entries are written to a temporary file and synced
        outside `lock` (the store's append lock); under it the file replaces the old one unless
        the index was cut meanwhile. Call after a checkpoint that saved this log start: a crash
        may then leave either file."""
        entries = self.aborted
        if not len(entries) or entries["last"][0] >= log_start:  # the usual answer, without the lock
            return
        with lock:
            entries, generation = self.aborted, self._generation
            gone = int(np.searchsorted(entries["last"], log_start))
            if not gone:
                return
        kept = entries[gone:]
        tmp = self.path.with_name(ABORTED_INDEX + ".tmp")
        reserved = len(kept) + RESERVE_ENTRIES
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, reserved * ENTRY_SIZE)
            os.pwrite(fd, kept.tobytes(), 0)
            os.fsync(fd)
            with lock:
                now = self.aborted
                later = now[len(entries):]  # added meanwhile
                if self._generation != generation or not self.path.parent.is_dir() or \
                        len(kept) + len(later) > reserved:
                    tmp.unlink(missing_ok=True)
                    return
                os.pwrite(fd, later.tobytes(), len(kept) * ENTRY_SIZE)
                os.rename(tmp, self.path)
                count = len(kept) + len(later)
                buf = np.zeros(max(16, 2 * count), ABORTED)
                buf[:count] = now[gone:]
                self._buf, self._reserved, self._generation = buf, reserved, self._generation + 1
                self.aborted = buf[:count]
                self.dirty = self.dirty or bool(len(later))
        except OSError as exc:  # a full disk, say: the old file stays, and the next checkpoint tries again
            log.warning("could not rewrite %s without the entries below the log start: %s", self.path, exc)
            tmp.unlink(missing_ok=True)
            return
        finally:
            os.close(fd)
        fsync_dir(self.path.parent)
