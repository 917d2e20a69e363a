"""The commitlog: one append-only sequence of entries shared by every topic and partition.

Owns the segment list, the single write position, rolling to the next segment, the
allocator thread that gives the active segment disk blocks ahead of the writer, one
ALLOCATE_STEP at a time, and creates the next segment when the writer nears the end, reading a batch by position,
scanning/truncating for recovery, and dropping old segments for retention.
Never knows about consume queues, topics' metadata or flushing policy. Callers serialise
appends (one writer).
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import crc32c

from protocol.record_batch import CRC_START
from protocol.record_batch import HEADER as _BATCH_HEADER
from store import entry as E
from store.atomic_file import fsync_dir
from store.errors import BatchCrcMismatch, EntryTooLarge, ReplicationError, StorageFull
from store.piped import PipedBatch
from store.segment import ALLOCATE_STEP, Segment, WriteBuffer, write_zeros
from store.segment_walk import CorruptRegion, Ending, Tail, claimed_header, resync, walk

log = logging.getLogger(__name__)


# The append path's struct writers, bound once: attribute lookups were a measurable part of
# a 1 KiB append (about 1.5 us in all).
_pack_header, _pack_crc = E.pack_header_and_rewrite, E.pack_crc
_HEADER_SIZE, _CRC_FROM, _MAGIC_DATA = E.HEADER_SIZE, E.CRC_FROM, E.MAGIC_DATA
_crc = crc32c.crc32c
_frame = E.frame  # store/_entry.c where built, else E.frame_into
_bisect_right = bisect.bisect_right
_unpack_header = _BATCH_HEADER.unpack_from
_REWRITTEN = E.BATCH_REWRITE.size  # the batch's first bytes the entry header rewrites (16)
_HEAD = _HEADER_SIZE + _REWRITTEN
# Batches from this size on are written from the request's own buffer (pwritev) instead of being
# copied into the write buffer first; below it the copy costs less than setting up the call.
DIRECT_BYTES = 64 << 10
WRITE_BUFFER_BYTES = 256 << 10  # what one pwrite() of a request's deferred appends takes at most

# read_tail's reach: how far ahead of a follower the write position may be for its next chunk to
# be read on the master's event loop. A follower under load is often more than one chunk
# (CHUNK_BYTES, 4 MiB) behind; read_entries' walk in a worker thread, with a CRC check of every
# entry, cost the master a thread hop and a pass over each chunk's bytes.
TAIL_BYTES = 64 << 20  # written a moment ago: resident
# Entries stepped over per chunk at most: 1,024 steps take ~0.1 ms. Smaller entries than 4 KiB on
# average (10,000 partitions) go to read_entries after those steps, a small part of its walk.
TAIL_HOPS = 1024


def _entries_within(view: memoryview, begin: int, stop: int, max_bytes: int) -> int | None:
    """The end of the whole entries from `begin` (at least one) that fit in `max_bytes`, stepping
    by each entry's length; None after TAIL_HOPS entries or at anything but a data entry."""
    unpack, limit, local = E.PREFIX.unpack_from, begin + max_bytes, begin
    for _ in range(TAIL_HOPS):
        length, _crc_field, magic, _flags, _topic = unpack(view, local)
        if magic != _MAGIC_DATA or length < _HEADER_SIZE or local + length > stop:
            return None
        if local + length > limit:
            return local if local > begin else local + length
        local += length
    return None


_NEVER = 1 << 62  # an allocator trigger the writer never reaches
ZERO_LEAD = 2 * ALLOCATE_STEP  # sync mode: zero-filled space kept ahead of the writer
STATE_RESERVE = 64 * 1024  # bytes at each segment's end for state records only (at most 1/16 of it)


class CommitLog:
    def __init__(self, directory: Path, segment_bytes: int, prezero: bool = False) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        # The last bytes of every segment take only entries of the internal state topic
        # (store/state.py): on a full disk, where no next segment can be made, retention can
        # still append the live state records it must carry before it deletes a segment.
        self.state_reserve = min(STATE_RESERVE, segment_bytes // 16)
        self.prezero = prezero
        # Each entry is encoded in a buffer and written with pwrite() into the page cache, never
        # stored through the mapping; reads still go through the mapping, which sees the same
        # pages (RocketMQ's transientStorePoolEnable likewise writes through the file channel).
        # A store through the mapping faults each new page of the file in and zero-fills it
        # before the bytes overwrite it, where pwrite() of whole pages fills them without
        # zeroing: on this 2-core VM 1 GiB of 16 KiB entries took 2.9 s through a fresh
        # mapping and 0.7 s with pwrite() (bench/write_path_probe.py), and a broker taking
        # librdkafka's 16 KiB records spent 73% of its CPU in that memset, in the event loop's
        # faults and in a thread that faulted pages in ahead of it (docs/notes/produce-path.md).
        # In sync mode the difference is in fdatasync too: after stores through a shared mapping
        # it took 0.40-0.42 ms where after pwrite() of the same bytes 0.14 ms (8 KiB per fsync):
        # the write fault starts a journal handle that the next fdatasync must commit.
        #
        # Appends of one produce request (Store.append_many) are encoded one after the other in
        # the buffer and written together (`defer`, then `write_deferred`): one pwrite() per request,
        # not one per partition. The write position moves only once the bytes are written,
        # since readers in other threads (shipping to followers, the key dispatcher) read up
        # to it without the append lock.
        self._buffer = WriteBuffer(WRITE_BUFFER_BYTES)
        self._pending = 0  # bytes encoded in the buffer, not written yet (at the write position)
        self._alloc_trigger = _NEVER  # the writer wakes the allocator when it passes this
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.alloc"):
            stale.unlink()
        # The segment list and their start positions, replaced together as one tuple: readers
        # (fetches on the event loop, lookups in worker threads) take no lock, and the
        # retention thread drops segments meanwhile. Two lists shrunk in two statements let a
        # reader bisect the old starts and index the new list: the wrong mapping.
        self._table: tuple[tuple[Segment, ...], tuple[int, ...]] = ((), ())
        self._set([Segment.open(p) for p in sorted(directory.iterdir())])
        if not self.segments:  # an empty log: one step of disk until writing begins
            self._add(Segment.create(directory, 0, segment_bytes, prezero, first=ALLOCATE_STEP))
        self.active = self.segments[0]
        self.write_position = self.active.start
        self._ahead: Segment | None = None
        self.spliced_end = 0  # the end of what splice_target handed out (shipped, maybe not yet applied)
        self._alloc_wanted = threading.Event()
        self._alloc_lock = threading.Lock()
        self._stopping = False
        self._allocator: threading.Thread | None = None

    # ---- positions -------------------------------------------------------------------
    @property
    def segments(self) -> tuple[Segment, ...]:
        """The segments, oldest first (a snapshot: it never changes once read)."""
        return self._table[0]

    def _set(self, segments: list[Segment] | tuple[Segment, ...]) -> None:
        self._table = (tuple(segments), tuple(s.start for s in segments))

    @property
    def min_position(self) -> int:
        return self.segments[0].start

    def segment_at(self, position: int) -> Segment | None:
        segments, starts = self._table  # one snapshot for the bisect and the index
        i = bisect.bisect_right(starts, position) - 1
        if i < 0:
            return None
        seg = segments[i]
        return seg if position < seg.end else None

    def view(self, position: int, size: int) -> memoryview | None:
        """Zero-copy view of bytes [position, position+size), or None if that segment is gone."""
        segments, starts = self._table  # segment_at(), inlined: once per batch of every fetch
        i = _bisect_right(starts, position) - 1
        if i < 0:
            return None
        seg = segments[i]
        local = position - seg.start
        if local >= seg.size:
            return None
        return seg.view[local:local + size]

    # ---- appending -------------------------------------------------------------------
    def append(self, batch: bytes | bytearray | memoryview, topic_id: bytes, topic: bytes,
               partition: int, base_offset: int, record_count: int, store_ts: int,
               max_ts: int, leader_epoch: int = 0, reserved: bool = False, flags: int = 0,
               defer: bool = False) -> int:
        """Write one entry; returns the commitlog position of its batch bytes. The batch's
        baseOffset, batchLength and partitionLeaderEpoch are set as Kafka's leader sets them.

        The entry is encoded in the write buffer, then written with pwrite(); a large batch in a
        writable buffer is not copied there but written around (pwritev). With `defer` the
        entry stays in the buffer, after those deferred before it, until `write_deferred` (or until
        an entry that does not fit there, a roll or a large batch writes them first): the caller
        calls it before anything may read the entry."""
        n = len(batch)
        topic_length = len(topic)
        length = _HEADER_SIZE + n + topic_length
        pending = self._pending
        seg = self.active
        local = self.write_position + pending - seg.start
        if local + length > (seg.size if reserved else seg.size - self.state_reserve):
            if pending:
                self.write_deferred()
                pending = 0
            seg = self._roll(length)
            local = 0
        if local + length > seg.allocated:  # the allocator fell behind: allocate here (StorageFull: nothing written)
            self._grow_now(seg, local + length)
        buffer = self._buffer
        if type(batch) is PipedBatch:
            if pending:
                self.write_deferred()
            self._append_piped(batch, seg, local, length, topic_id, topic, partition, base_offset, record_count,
                               store_ts, max_ts, leader_epoch, flags)
            self.write_position += length
        elif n >= DIRECT_BYTES and type(batch) is memoryview and not batch.readonly:
            if pending:
                self.write_deferred()
            # a large batch (received into a buffer of its own) is written from where it lies: the
            # header and its rewritten first fields, its other bytes, the topic, in one pwritev()
            mv, rest = buffer.view, batch[_REWRITTEN:]
            _pack_header(mv, 0, length, 0, _MAGIC_DATA, flags, topic_length, topic_id, partition,
                         base_offset, record_count, store_ts, max_ts, base_offset, n - 12, leader_epoch)
            mv[_HEAD:_HEAD + topic_length] = topic
            _pack_crc(mv, 4, _crc(topic, _crc(rest, _crc(mv[_CRC_FROM:_HEAD]))))
            buffer.pwrite_around(seg.fd, _HEAD, rest, _HEAD, topic_length, local)
            self.write_position += length
        else:
            if pending + length > len(buffer.view):
                if pending:
                    self.write_deferred()
                    pending = 0
                if length > len(buffer.view):
                    buffer = self._buffer = WriteBuffer(length)
            _frame(buffer.view, pending, batch, topic, topic_id, partition, base_offset, record_count, store_ts, max_ts,
                   leader_epoch, flags)
            self._pending = pending + length
            if not defer:
                self.write_deferred()
        position = seg.start + local
        written = position + length
        seg.newest_timestamp = store_ts
        if written >= self._alloc_trigger:
            self._alloc_trigger = _NEVER  # wake it once; it sets the next trigger
            self._alloc_wanted.set()
        return position + _HEADER_SIZE

    def _append_piped(self, batch: PipedBatch, seg: Segment, local: int, length: int, topic_id: bytes, topic: bytes,
                      partition: int, base_offset: int, record_count: int, store_ts: int, max_ts: int,
                      leader_epoch: int, flags: int) -> None:
        """The batch goes from its pipe into the file behind the entry's header (the one copy),
        its CRC is checked from the mapping, and only then are the header and topic written
        around it. A failed CRC zeroes the bytes and raises BatchCrcMismatch: nothing is left
        for a recovery to find, and the write position does not move."""
        n = batch.size
        at = local + _HEADER_SIZE
        batch.splice_into(seg.fd, at)
        view = seg.near_write_view()
        mv = self._buffer.view
        _pack_header(mv, 0, length, 0, _MAGIC_DATA, flags, len(topic), topic_id, partition,
                     base_offset, record_count, store_ts, max_ts, base_offset, n - 12, leader_epoch)
        try:
            if _crc(view[at + CRC_START:at + n]) != _unpack_header(batch.head)[4]:  # the batch's CRC field
                write_zeros(seg.fd, at, n)
                raise BatchCrcMismatch("record batch CRC-32C mismatch")
            entry_crc = _crc(view[at + _REWRITTEN:at + n], _crc(mv[_CRC_FROM:_HEAD]))
        finally:
            seg.unmap_near(at, n)
        topic_length = len(topic)
        mv[_HEAD:_HEAD + topic_length] = topic
        _pack_crc(mv, 4, _crc(topic, entry_crc))
        fd = seg.fd
        _pwrite_all(fd, mv[_HEAD:_HEAD + topic_length], at + n)
        _pwrite_all(fd, mv[:_HEAD], local)

    def write_deferred(self) -> None:
        """Write the deferred entries (one pwrite) and move the write position past them. On an
        I/O error they are dropped and the write position stays where it was."""
        pending = self._pending
        if pending:
            self._pending = 0
            seg = self.active
            # the space is allocated: only an I/O error fails
            self._buffer.pwrite(seg.fd, pending, self.write_position - seg.start)
            self.write_position += pending

    def discard(self) -> None:
        """Drop the deferred entries unwritten (an append of the request failed unexpectedly)."""
        self._pending = 0

    def _grow_now(self, seg: Segment, needed: int) -> None:
        """Allocate on the append path, which the allocator fell behind. Without zeros: the whole
        segment in one call if the disk has room (else at least this entry). With zeros (sync
        mode): only what this entry needs, after the allocator's step under way; the allocator
        zero-fills the rest off the event loop."""
        if self.prezero:
            seg.grow(needed, True)
        else:
            try:
                seg.grow(seg.size, False)
            except StorageFull:
                seg.grow(needed, False)  # at least this entry, if the disk still has room for it
        self._alloc_wanted.set()

    def _roll(self, length: int) -> Segment:
        old = self.active
        if length > self.segment_bytes:
            raise EntryTooLarge(f"entry of {length} bytes exceeds commitlog.segment.bytes")
        with self._alloc_lock:
            nxt, self._ahead = self._ahead, None
            if nxt is None:
                nxt = self.segment_at(old.end)
            if nxt is None:
                # StorageFull here leaves everything untouched
                nxt = Segment.create(self.directory, old.end, self.segment_bytes, self.prezero,
                                     first=ALLOCATE_STEP if self.prezero else self.segment_bytes)
                self._add(nxt)
            local = self.write_position - old.start
            E.write_blank(old.view, local, old.size - local)
            self.active = nxt
            self.write_position = nxt.start
        self._alloc_wanted.set()
        return nxt

    def _add(self, seg: Segment) -> None:
        self._set((*self.segments, seg))

    # ---- replication: shipping entries, applying them, truncating ------------------------
    def read_tail(self, position: int, max_bytes: int) -> memoryview | None:
        """read_entries' quick case, for the caller's own thread: whole entries from `position`,
        an entry boundary, up to `max_bytes` (at least one entry) when the write position is at
        most TAIL_BYTES ahead in the same segment (what a follower that keeps up is shipped next:
        bytes appended a moment ago, so resident); None otherwise (read_entries, in a worker
        thread). Beyond `max_bytes` it steps from entry to entry by their lengths, at most
        TAIL_HOPS of them, without read_entries' CRC check: these entries were checked when they
        were appended here, and the follower checks each one it applies."""
        end = self.write_position
        if not position < end <= position + TAIL_BYTES:
            return None
        seg = self.segment_at(position)
        if seg is None or end >= seg.end:  # at a segment's end: a blank may fill it (read_entries)
            return None
        begin, stop = position - seg.start, end - seg.start
        if stop - begin > max_bytes:
            stop = _entries_within(seg.view, begin, stop, max_bytes)
            if stop is None:
                return None
        return seg.view[begin:stop]

    def read_entries(self, position: int, max_bytes: int) -> tuple[int, memoryview]:
        """What a leader ships (MetaQ's HA: the slave pulls the master's commitlog): whole
        entries from `position`, an entry boundary, up to `max_bytes` (at least one entry),
        within one segment, as (the position of the first, a view of their bytes over the
        segment's mmap, which the view keeps mapped). Past the last entry of a full segment it
        continues at the next segment's start; (write position, empty) when there is nothing
        more. ValueError for a position outside the log."""
        while True:
            end = self.write_position  # an entry boundary: appends move it past whole entries
            if position == end:
                return position, memoryview(b"")
            seg = self.segment_at(position)
            if seg is None or position > end:
                raise ValueError(f"commitlog position {position} is outside [{self.min_position}, {end}]")
            in_segment = seg.start <= end < seg.end
            if in_segment and end - position <= max_bytes:  # all of the rest: no need to walk its entries
                return position, seg.view[position - seg.start:end - seg.start]
            stop = end - seg.start if in_segment else seg.size
            local = begin = position - seg.start
            for item in walk(seg, stop, start=local):
                if not isinstance(item, E.EntryHeader):
                    break
                if local > begin and local + item.length - begin > max_bytes:
                    break
                local += item.length
            if local > begin:
                return position, seg.view[begin:local]
            if seg.end <= end:  # a blank marker or zeros end this segment's entries
                position = seg.end
                continue
            raise ValueError(f"no valid entry at commitlog position {position}")

    def append_raw(self, position: int, data: bytes | memoryview,
                   headers: list[E.EntryHeader] | None = None, written: bool = False) -> list[E.EntryHeader]:
        """Apply entries a leader shipped: they are validated (each one's CRC) before anything is
        written, unless the caller did so and passes their `headers`, then written at `position`
        byte for byte. `position` is the write position, or the end of the active segment when
        the leader rolled there (this log rolls too: same segment size, same layout). `written`:
        the bytes already lie there (spliced into the file, splice_target; `data` is this log's
        mapping of them), and the write position only moves past them. Returns the entries'
        headers; ReplicationError if they do not fit."""
        view = memoryview(data)
        if headers is None:
            headers = []
            local = 0
            while local < len(view):
                outcome = E.read_entry(view, local, position)
                if not isinstance(outcome, E.EntryHeader):
                    raise ReplicationError(f"shipped bytes at commitlog position {position + local} are not a valid entry")
                headers.append(outcome)
                local += outcome.length
        n = len(view)
        if position != self.write_position:
            if written or position != self.active.end or n > self.segment_bytes:
                raise ReplicationError(f"shipped entries start at {position}, this log ends at {self.write_position}")
            self._roll(n)
        seg = self.active
        at = self.write_position - seg.start
        if at + n > seg.size:
            raise ReplicationError("shipped entries cross a segment boundary (different commitlog.segment.bytes?)")
        if at + n > seg.allocated:
            self._grow_now(seg, at + n)
        # Written with pwrite(), as `append` writes (its comment says why): on 3 nodes at
        # acks=all, 1 partition, probes went from 285-377 MB/s (median 356) with stores
        # through the mapping to 357-402 (median 384), the followers from about 0.75 to 0.65
        # CPU s/GB. The GIL is released meanwhile.
        if not written:
            done = os.pwrite(seg.fd, view, at)
            if done != n:
                raise OSError(f"short commitlog write of {done} of {n} bytes")
        self.write_position = end = self.write_position + n
        if headers:
            seg.newest_timestamp = headers[-1].store_timestamp
        if end >= self._alloc_trigger:  # the allocator: as in `append`
            self._alloc_trigger = _NEVER
            self._alloc_wanted.set()
        return headers

    def splice_target(self, position: int, n: int) -> tuple[int, int] | None:
        """Where a follower may write shipped bytes [position, position+n) straight into the
        active segment's file before they are applied (append_raw with written=True, in order):
        (descriptor, offset in the file), with disk blocks allocated; None when they do not lie
        after the write position within the active segment (the leader rolled to the next one:
        they take append_raw's way). Called on the follower's event loop while a worker thread
        may apply the chunk before: that moves the write position up to `position` at most,
        and rolls only for a chunk shipped into the next segment, which this one lies before.
        Raises StorageFull or OSError when the blocks cannot be allocated."""
        seg = self.active
        if position < self.write_position or position < seg.start or position + n > seg.end or seg.fd < 0:
            return None
        at = position - seg.start
        if at + n > seg.allocated:
            self._grow_now(seg, at + n)
        self.spliced_end = max(self.spliced_end, position + n)
        return seg.fd, at

    def discard_spliced(self) -> None:
        """Zero what splice_target handed out beyond the write position (a stream that ended
        before its chunks were applied), so that no shipped bytes wait past the log's end for
        a recovery to take them as entries after what another master writes there."""
        position, end = self.write_position, self.spliced_end
        self.spliced_end = 0
        while position < end:
            seg = self.segment_at(position)
            if seg is None or seg.fd < 0:
                return
            stop = min(end, seg.end)
            write_zeros(seg.fd, position - seg.start, stop - position)
            position = stop

    def truncate_to(self, position: int) -> None:
        """Cut the log back to `position`, an entry boundary (a returning old leader drops what
        the new one does not have): the bytes after it are zeroed, later segments unlinked."""
        seg = self.segment_at(position) if position < self.write_position else self.active
        if not self.min_position <= position <= self.write_position or seg is None:
            raise ValueError(f"commitlog position {position} is outside [{self.min_position}, {self.write_position}]")
        if position == self.write_position:
            return
        index = self.segments.index(seg)
        with self._alloc_lock:
            if self._ahead is not None and self._ahead.start > seg.start:
                self._ahead = None
            self._truncate(index, position - seg.start)

    # ---- allocator thread ------------------------------------------------------------
    def start_allocator(self) -> None:
        self._allocator = threading.Thread(target=self._allocate_loop, name="commitlog-allocator",
                                           daemon=True)
        self._alloc_wanted.set()
        self._allocator.start()

    def stop_allocator(self) -> None:
        self._stopping = True
        self._alloc_wanted.set()
        if self._allocator is not None:
            self._allocator.join()
            self._allocator = None

    def _allocate_loop(self) -> None:
        while True:
            self._alloc_wanted.wait()
            self._alloc_wanted.clear()
            if self._stopping:
                return
            try:
                self.allocate_ahead()
            except OSError:
                log.exception("commitlog allocator failed; appends will allocate on demand")

    def allocate_ahead(self) -> bool:
        """Once the writer is half a step into a segment that holds only its first step (an
        empty log's first segment), allocate the rest of it in one call, and create the next
        segment, whole (MetaQ's preallocation: the writer never allocates). False when out of
        space. Then set the writer's trigger for the next call. In sync mode, `_zero_ahead`.

        One posix_fallocate per segment: allocating segments in 64 MiB steps while they were
        written cost 12% of append throughput on ext4 (1 KiB appends: 450,000 -> 398,000 a
        second), and creating the next segment only near the end of this one another 7%.
        Only an empty log's first segment starts small, which is what keeps an idle broker
        small (one step of disk, not two whole segments)."""
        active = self.active
        local = self.write_position - active.start
        if self.prezero:
            return self._zero_ahead(active, local)
        if active.allocated < active.size and local >= ALLOCATE_STEP // 2:
            try:
                active.grow(active.size, False)
            except StorageFull:
                return False
        ok = True
        if active.allocated >= active.size and local >= ALLOCATE_STEP // 2:
            ok = self._prepare_next()
        self._rearm(active, ok)
        return ok

    def _zero_ahead(self, active: Segment, local: int) -> bool:
        """Sync mode: keep the zero-filled space ZERO_LEAD ahead of the writer, a step at a time,
        and the next segment's first step once the active one is zero-filled to its end. Zeros
        written a segment and a half at once (2 GiB with 1 GiB segments) kept the disk busy for
        seconds after the writer's first 32 MiB, and every group commit's fdatasync waited behind
        them: produce sync acks=all 113k msg/s and p99 487 ms where a broker started seconds
        earlier gave 400k+ (docs/notes/produce-path.md, "The second sync phase")."""
        ok = True
        if local >= ALLOCATE_STEP // 2:  # an idle log's first step waits for the writer
            try:
                active.grow(local + ZERO_LEAD, True)
            except StorageFull:
                ok = False
            if ok and active.allocated >= active.size:
                ok = self._prepare_next()
        self._rearm(active, ok)
        return ok

    def _rearm(self, active: Segment, ok: bool) -> None:
        """Set the writer's trigger for the allocator's next call, unless the log rolled meanwhile:
        half a step into a segment still being allocated (in sync mode, once the zeroed lead is
        down to one step); _NEVER once the next segment exists (the roll wakes the allocator),
        or when out of space (the append path meets it)."""
        if active is not self.active:
            return
        if active.allocated < active.size:
            lead_from = active.allocated - ALLOCATE_STEP if self.prezero else 0
            trigger = active.start + max(ALLOCATE_STEP // 2, lead_from)
        elif self._ahead is None:
            trigger = active.start + ALLOCATE_STEP // 2
        else:
            trigger = _NEVER
        self._alloc_trigger = trigger if ok else _NEVER
        if ok and trigger <= self.write_position:
            self._alloc_wanted.set()

    def _prepare_next(self) -> bool:
        """Make sure the segment after the active one exists; False when out of space."""
        with self._alloc_lock:
            if self._ahead is not None:
                return True
            start = self.active.end
            existing = self.segment_at(start)
            if existing is None:
                try:
                    existing = Segment.create(self.directory, start, self.segment_bytes, self.prezero,
                                              first=ALLOCATE_STEP if self.prezero else self.segment_bytes)
                except StorageFull:
                    return False
                fsync_dir(self.directory)
                self._add(existing)
            self._ahead = existing
            return True

    def wait_ahead(self, timeout: float) -> bool:
        """Block until the allocator has a step allocated ahead of the writer (benchmarks
        measure steady state)."""
        deadline = time.monotonic() + timeout
        while True:
            active = self.active
            local = self.write_position - active.start
            if active.allocated >= min(active.size, local + ALLOCATE_STEP // 2):
                return True
            if time.monotonic() > deadline:
                return False
            self._alloc_wanted.set()
            time.sleep(0.01)

    # ---- flushing --------------------------------------------------------------------
    def flush(self, start: int, end: int) -> None:
        """fsync every segment holding bytes of [start, end)."""
        segments, starts = self._table
        i = max(0, bisect.bisect_right(starts, start) - 1)
        for seg in segments[i:]:
            if seg.start >= end:
                break
            if seg.end > start and seg.fd >= 0:
                seg.flush()

    # ---- recovery ----------------------------------------------------------------------
    def scan(self, start: int | None = None) -> Iterator[E.EntryHeader | CorruptRegion]:
        """Yield every valid entry from `start` (an entry boundary, such as a checkpoint's write
        position; default: the oldest segment), and every corrupt region that valid entries
        follow. Afterwards the write position is just past the last valid entry and anything
        invalid beyond it (a torn tail) is zeroed; corrupt regions stay as they are."""
        first, local = 0, 0
        if start is not None:
            first = max(0, bisect.bisect_right(self._table[1], start) - 1)
            local = start - self.segments[first].start
        end_seg, end_local, zero_tail = first, local, False
        for i, seg in enumerate(self.segments):
            if i < first:
                continue
            begin, local = local, 0
            tail = Tail(Ending.END, begin)
            for item in walk(seg, start=begin):
                if isinstance(item, Tail):
                    tail = item
                    break
                if isinstance(item, E.EntryHeader):
                    seg.newest_timestamp = item.store_timestamp
                yield item
            end_seg, end_local, zero_tail = i, tail.local, tail.kind == Ending.END
            if tail.kind == Ending.BLANK:
                end_seg, end_local = i + 1, 0
                continue
            if i + 1 < len(self.segments) and _starts_with_data(self.segments[i + 1]):
                # not a tail: the next segment holds entries, so these bytes were damaged
                yield CorruptRegion(seg.start + tail.local, seg.end, claimed_header(seg, tail.local, seg.size))
                end_seg, end_local = i + 1, 0
                continue
            break
        self._truncate(end_seg, end_local, zero_tail)

    def verify(self, until: int | None = None) -> list[CorruptRegion]:
        """Check the CRC of every entry below `until` (default: the write position); returns the
        damaged regions. Everything below the write position was written, so invalid bytes
        there are corruption, never a torn tail."""
        until = self.write_position if until is None else min(until, self.write_position)
        regions: list[CorruptRegion] = []
        for seg in self.segments:
            if seg.start >= until:
                break
            stop = min(seg.size, until - seg.start)
            for item in walk(seg, stop, decode=False):
                if isinstance(item, CorruptRegion):
                    regions.append(item)
                elif item.kind != Ending.BLANK and item.local < stop:
                    regions.append(CorruptRegion(seg.start + item.local, seg.start + stop,
                                                 claimed_header(seg, item.local, stop)))
        return regions

    def _truncate(self, seg_index: int, local: int, known_zero: bool = False) -> None:
        if seg_index >= len(self.segments):
            self.active = self.segments[-1]
            self.write_position = self.active.end
            self._roll(0)
            return
        self.active = self.segments[seg_index]
        self.write_position = self.active.start + local
        if not known_zero:
            self.active.zero_from(local)
        dropped = self.segments[seg_index + 1:]
        self._set(self.segments[:seg_index + 1])
        for seg in dropped:
            seg.drop(unlink=True)

    def restore(self, write_position: int, newest: dict[int, int]) -> None:
        """Resume after a clean shutdown at the checkpointed write position."""
        seg = self.segment_at(write_position) or self.segments[-1]
        self.active = seg
        self.write_position = write_position
        for s in self.segments:
            s.newest_timestamp = newest.get(s.start, -1)

    # ---- retention ---------------------------------------------------------------------
    def detach_oldest(self, count: int) -> list[Segment]:
        """Remove the `count` oldest segments from the log (never the active one); the caller
        unlinks them off the append path."""
        segments = self.segments
        count = min(count, segments.index(self.active))
        self._set(segments[count:])
        return list(segments[:count])

    def close(self) -> None:
        self.stop_allocator()
        if self.spliced_end > self.write_position:  # the follower's stream ends first and zeroes them; in case not
            try:
                self.discard_spliced()
            except OSError as exc:
                log.warning("cannot zero shipped bytes never applied past commitlog position %d: %s",
                            self.write_position, exc)
        for seg in self.segments:
            seg.drop(unlink=False)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    if os.pwrite(fd, data, offset) != len(data):
        raise OSError(errno.EIO, f"short write at {offset}")


def _starts_with_data(seg: Segment) -> bool:
    """Does a segment hold entries (valid from its start, or after damage at its start)?
    A segment starting with zeros is one allocated ahead and never written."""
    outcome = E.read_entry(seg.view, 0, seg.start)
    if isinstance(outcome, E.EntryHeader):
        return True
    return outcome == E.Scan.BAD and resync(seg, 0, seg.size) is not None
