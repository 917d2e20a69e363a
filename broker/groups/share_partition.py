"""One share-partition of a share group (KIP-932, Kafka's SharePartition): which records of a
partition the group's members may fetch, which are acquired by whom until when, which are done.
Served by broker/groups/share_coordinator.py.

The state of the in-flight window [start, end) is one byte per record, in a numpy array beside
the partition's consume queue: the low nibble is the record's state, the high nibble its delivery
count (Kafka's `group.share.delivery.count.limit` is at most 10). Acquisitions are remembered as
ranges (first, last, member, lock deadline), as members acquire records in batches, so a million
in-flight records cost about a megabyte. Sans-IO: time is passed in; `durable()` is what must
survive a restart (the start offset and, for each run of records, state and delivery count:
Kafka's ShareSnapshot), and acquired records come back AVAILABLE, to be delivered again."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4  # Kafka's RecordState values
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4  # Kafka's AcknowledgeType values (RENEW: ShareFetch v2)
GAP = 0  # an acknowledge type for offsets without a record (Kafka's GAP): archived
STATE_MASK = 0x0F
COUNT_SHIFT = 4
REJECTED, LIMIT_REACHED = 1, 2  # why a record was archived, for the group's dead-letter topic (KIP-1191)
DELAYED = "\x00delayed"  # who holds a RELEASEd record until its redelivery delay has passed (never a member id)


@dataclass(slots=True)
class Acquisition:
    first: int
    last: int
    member: str
    deadline_ms: int


class SharePartition:
    def __init__(self, start: int, *, lock_ms: int = 30000, delivery_limit: int = 5, max_in_flight: int = 2000,
                 release_delays_ms: tuple[int, ...] = ()) -> None:
        if not 1 <= delivery_limit <= 15:
            raise ValueError("group.share.delivery.count.limit is between 1 and 15 here")
        self.start = start  # Kafka's share-partition start offset (SPSO)
        self.end = start  # the next offset never delivered yet (SPEO)
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        # RocketMQ's retry delays (Gregor's group config gregor.share.release.delay.ms): a record RELEASEd
        # after its n-th delivery is available again only after the n-th delay (the last one for later
        # deliveries); empty: at once, as in Kafka
        self.release_delays_ms = release_delays_ms
        self._window = np.zeros(0, dtype=np.uint8)  # offsets [start, end)
        self.acquisitions: list[Acquisition] = []
        # records archived since the last take_dead(): (offset, delivery count, REJECTED or LIMIT_REACHED)
        self.dead: list[tuple[int, int, int]] = []

    # ---- reading the state ------------------------------------------------------------------------
    def state(self, offset: int) -> int:
        if offset < self.start:
            return ACKNOWLEDGED
        if offset >= self.end:
            return AVAILABLE
        return int(self._window[offset - self.start] & STATE_MASK)

    def delivery_count(self, offset: int) -> int:
        if not self.start <= offset < self.end:
            return 0
        return int(self._window[offset - self.start] >> COUNT_SHIFT)

    # ---- acquiring --------------------------------------------------------------------------------
    def acquire(self, now_ms: int, member: str, max_records: int, fetchable_end: int) -> list[tuple[int, int, int]]:
        """Lock up to `max_records` records for `member`: first the window's available ones, then
        new ones up to `fetchable_end` (the high watermark, or the last stable offset) while the
        window stays within max_in_flight. Returns (first, last, delivery count) runs."""
        self.expire(now_ms)
        want = max_records
        picked: list[int] = []
        if len(self._window):
            free = np.flatnonzero((self._window & STATE_MASK) == AVAILABLE)[:want]
            picked = (free + self.start).tolist()
            want -= len(picked)
        room = self.max_in_flight - (self.end - self.start)
        grow = max(0, min(want, room, fetchable_end - self.end))
        if grow:
            picked += list(range(self.end, self.end + grow))
            self._window = np.concatenate([self._window, np.zeros(grow, dtype=np.uint8)])
            self.end += grow
        if not picked:
            return []
        index = np.asarray(picked, dtype=np.int64) - self.start
        counts = (self._window[index] >> COUNT_SHIFT) + 1
        self._window[index] = (counts << COUNT_SHIFT).astype(np.uint8) | ACQUIRED
        runs = _runs(picked, counts.tolist())
        deadline = now_ms + self.lock_ms
        self.acquisitions += [Acquisition(first, last, member, deadline) for first, last, _ in runs]
        return runs

    # ---- acknowledging ----------------------------------------------------------------------------
    def acknowledge(self, now_ms: int, member: str, first: int, last: int, types: list[int]) -> bool:
        """Acknowledge [first, last] with one type for all, or one per offset (Kafka's
        AcknowledgementBatch). False (Kafka's INVALID_RECORD_STATE) unless every offset is acquired
        by `member` (GAP aside); offsets below the start are done, and ignored."""
        if not types or (len(types) != 1 and len(types) != last - first + 1) or last >= self.end:
            return False
        if first < self.start:  # below the start: done already, ignored (as Kafka does)
            if last < self.start:
                return True
            types = types if len(types) == 1 else types[self.start - first:]
            first = self.start
        offsets = np.arange(first, last + 1)
        kinds = np.full(len(offsets), types[0], dtype=np.int8) if len(types) == 1 else np.asarray(types, dtype=np.int8)
        index = offsets - self.start
        held = self._held_by(member, first, last)
        states = self._window[index] & STATE_MASK
        if not np.all((states == ACQUIRED) & held | (kinds == GAP)):
            return False
        counts = self._window[index] >> COUNT_SHIFT
        new = states.copy()
        new[kinds == ACCEPT] = ACKNOWLEDGED
        new[(kinds == REJECT) | (kinds == GAP)] = ARCHIVED
        released = kinds == RELEASE
        new[released] = np.where(counts[released] >= self.delivery_limit, ARCHIVED, AVAILABLE)
        self.dead += [(int(o), int(c), REJECTED) for o, c in zip(offsets[kinds == REJECT], counts[kinds == REJECT])]
        spent = released & (counts >= self.delivery_limit)
        self.dead += [(int(o), int(c), LIMIT_REACHED) for o, c in zip(offsets[spent], counts[spent])]
        self._window[index] = (counts << COUNT_SHIFT).astype(np.uint8) | new.astype(np.uint8)
        renewed = offsets[kinds == RENEW].tolist()
        for lo, hi, _ in _runs(renewed, [0] * len(renewed)):  # still acquired: their lock starts again
            self._relock(member, lo, hi, now_ms + self.lock_ms)
        if self.release_delays_ms:  # released, not spent: held back until the delay for its count has passed
            later = released & (counts < self.delivery_limit)
            self._window[index[later]] = (counts[later] << COUNT_SHIFT).astype(np.uint8) | ACQUIRED
            for lo, hi, count in _runs(offsets[later].tolist(), counts[later].tolist()):
                delay = self.release_delays_ms[min(count, len(self.release_delays_ms)) - 1]
                self._relock(member, lo, hi, now_ms + delay, DELAYED)
        self._forget_acquisitions()
        self._advance()
        return True

    def archive_aborted(self, member: str, first: int, last: int) -> None:
        """[first, last], just acquired by `member`, holds records of an aborted transaction: a
        read_committed group never delivers them (archived, not dead-lettered; Kafka's
        filterAbortedTransactionalAcquiredRecords)."""
        lo, hi = max(first, self.start), min(last, self.end - 1)
        if lo > hi:
            return
        index = np.arange(lo, hi + 1) - self.start
        acquired = ((self._window[index] & STATE_MASK) == ACQUIRED) & self._held_by(member, lo, hi)
        counts = self._window[index] >> COUNT_SHIFT
        self._window[index[acquired]] = (counts[acquired] << COUNT_SHIFT).astype(np.uint8) | ARCHIVED
        self._forget_acquisitions()
        self._advance()

    def _relock(self, member: str, first: int, last: int, deadline_ms: int, holder: str | None = None) -> None:
        """Give [first, last] of `member`'s acquisitions a new deadline (and `holder`, if given),
        splitting the ranges it cuts."""
        kept = []
        for a in self.acquisitions:
            if a.member != member or a.last < first or a.first > last:
                kept.append(a)
                continue
            if a.first < first:
                kept.append(Acquisition(a.first, first - 1, member, a.deadline_ms))
            kept.append(Acquisition(max(a.first, first), min(a.last, last), holder or member, deadline_ms))
            if a.last > last:
                kept.append(Acquisition(last + 1, a.last, member, a.deadline_ms))
        self.acquisitions = kept

    def _held_by(self, member: str, first: int, last: int) -> np.ndarray:
        held = np.zeros(last - first + 1, dtype=bool)
        for a in self.acquisitions:
            if a.member == member and a.first <= last and a.last >= first:
                held[max(a.first, first) - first:min(a.last, last) - first + 1] = True
        return held

    # ---- time and members leaving -------------------------------------------------------------------
    def expire(self, now_ms: int) -> int:
        """Release the records whose lock ran out (archived past the delivery limit); how many."""
        late = [a for a in self.acquisitions if a.deadline_ms <= now_ms]
        return self._release(late)

    def release_member(self, member: str) -> int:
        """A member left: its acquired records are available again (Kafka releases them)."""
        return self._release([a for a in self.acquisitions if a.member == member])

    def _release(self, gone: list[Acquisition]) -> int:
        released = 0
        for a in gone:
            index = np.arange(max(a.first, self.start), a.last + 1) - self.start
            if not len(index):
                continue
            states, counts = self._window[index] & STATE_MASK, self._window[index] >> COUNT_SHIFT
            acquired = states == ACQUIRED
            back = np.where(counts >= self.delivery_limit, ARCHIVED, AVAILABLE).astype(np.uint8)
            self._window[index[acquired]] = (counts[acquired] << COUNT_SHIFT).astype(np.uint8) | back[acquired]
            spent = acquired & (counts >= self.delivery_limit)
            self.dead += [(int(i) + self.start, int(c), LIMIT_REACHED) for i, c in zip(index[spent], counts[spent])]
            released += int(np.count_nonzero(acquired))
        self.acquisitions = [a for a in self.acquisitions if a not in gone]
        self._advance()
        return released

    def take_dead(self) -> list[tuple[int, int, int]]:
        """The records archived (rejected, or past the delivery limit) since the last call."""
        dead, self.dead = self.dead, []
        return dead

    def next_deadline(self) -> int | None:
        return min((a.deadline_ms for a in self.acquisitions), default=None)

    # ---- the window ---------------------------------------------------------------------------------
    def _forget_acquisitions(self) -> None:
        """Drop acquisitions none of whose records is still acquired."""
        kept = []
        for a in self.acquisitions:
            lo, hi = max(a.first, self.start) - self.start, a.last - self.start + 1
            if hi > lo and np.any((self._window[lo:hi] & STATE_MASK) == ACQUIRED):
                kept.append(a)
        self.acquisitions = kept

    def _advance(self) -> None:
        """Move the start past the records that are done (acknowledged or archived)."""
        done = (self._window & STATE_MASK) & (ACKNOWLEDGED | ARCHIVED)
        pending = np.flatnonzero(done == 0)
        step = int(pending[0]) if len(pending) else len(self._window)
        if step:
            self._window = self._window[step:].copy()
            self.start += step

    def skip_to(self, offset: int) -> None:
        """The log no longer holds the records below `offset` (retention, DeleteRecords, a reset):
        the window starts there; their acquisitions are forgotten."""
        if offset <= self.start:
            return
        if offset >= self.end:
            self._window = np.zeros(0, dtype=np.uint8)
            self.end = offset
        else:
            self._window = self._window[offset - self.start:].copy()
        self.start = offset
        self.acquisitions = [Acquisition(max(a.first, offset), a.last, a.member, a.deadline_ms)
                             for a in self.acquisitions if a.last >= offset]

    def done(self) -> int:
        """Records of the window acknowledged or archived (the start moves past them once all before are)."""
        return int(np.count_nonzero((self._window & STATE_MASK) & (ACKNOWLEDGED | ARCHIVED)))

    def in_flight(self) -> int:
        return self.end - self.start

    # ---- the durable form (Kafka's ShareSnapshot) -----------------------------------------------------
    def durable(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(start, runs of (first, last, state, delivery count)) for the window's records that are
        not plain AVAILABLE-never-delivered; acquired records are written as AVAILABLE: after a
        restart they are delivered again (their count kept)."""
        states = self._window & STATE_MASK
        states = np.where(states == ACQUIRED, AVAILABLE, states)
        counts = self._window >> COUNT_SHIFT
        runs: list[tuple[int, int, int, int]] = []
        for i, (st, count) in enumerate(zip(states.tolist(), counts.tolist())):
            if st == AVAILABLE and count == 0:
                continue
            offset = self.start + i
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == st and runs[-1][3] == count:
                runs[-1] = (runs[-1][0], offset, st, count)
            else:
                runs.append((offset, offset, st, count))
        return self.start, runs

    @classmethod
    def load(cls, start: int, runs: list[tuple[int, int, int, int]], **settings) -> SharePartition:
        part = cls(start, **settings)
        end = max((last + 1 for _, last, _, _ in runs), default=start)
        part.end = end
        part._window = np.zeros(end - start, dtype=np.uint8)
        for first, last, state, count in runs:
            part._window[first - start:last - start + 1] = (count << COUNT_SHIFT) | state
        part._advance()
        return part


def _runs(offsets: list[int], counts: list[int]) -> list[tuple[int, int, int]]:
    """Consecutive offsets of equal delivery count as (first, last, count)."""
    runs: list[tuple[int, int, int]] = []
    for offset, count in zip(offsets, counts):
        if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
            runs[-1] = (runs[-1][0], offset, count)
        else:
            runs.append((offset, offset, count))
    return runs


# ---- the state record (store/state.py SHARE_PARTITION), Kafka's ShareSnapshot value ---------------------
_HEAD = struct.Struct(">Bqi")  # version, start offset, run count
_RUN = struct.Struct(">qqBB")  # first, last, state, delivery count
VERSION = 1


def encode(part: SharePartition) -> bytes:
    start, runs = part.durable()
    return _HEAD.pack(VERSION, start, len(runs)) + b"".join(_RUN.pack(*run) for run in runs)


def decode(value: bytes, **settings) -> SharePartition:
    version, start, count = _HEAD.unpack_from(value, 0)
    if version != VERSION:
        raise ValueError(f"share-partition state version {version} is not known here")
    runs = [_RUN.unpack_from(value, _HEAD.size + i * _RUN.size) for i in range(count)]
    return SharePartition.load(start, runs, **settings)
