"""The one dispatcher: what a commitlog entry becomes in the derived files.

RocketMQ derives every file beside the commitlog with one chain (CommitLogDispatcher: consume
queue, index file, ...) driven by ReputMessageService. Here:

* `to_queue` is the synchronous step, run by the append path (so a fetch sees a record at once),
  by recovery for every scanned entry, and by a follower applying shipped commitlog bytes:
  consume-queue entries (tag hashes for topics with `tag.header`), the high watermark, and the
  time index.
* `to_transactions` is the synchronous step for transactional and control batches (attribute
  bits 0x10 and 0x20; for every other batch the callers' cost is one attribute test): the
  partition's open transactions and its aborted-transactions index (store/transactions.py).
  Relocated batches (the log cleaner's copies) are not fed to it: their offsets were derived
  when first appended. A full rebuild derives a partition whose queue the cleaner touched with
  `rederive_transactions`, from its batches in offset order.
* `KeyDispatcher` is the asynchronous step, off the write path: a thread that follows the
  commitlog from the position the key index covers to the write position and indexes the keys
  of records of topics with `key.index.enable` (on by default, as RocketMQ's
  messageIndexEnable), handing the per-record walk to the key worker process
  (store/key_worker.py). A lookup waits a moment for it to catch up and otherwise says how far
  it is behind.

Never does network I/O; reads the commitlog only through the CommitLog it is given.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable

import numpy as np

from protocol.record_batch import ABORT_MARKER, COMMIT_MARKER, CONTROL_BIT, CONTROL_KEY, TRANSACTIONAL_BIT
from store import records
from store.commitlog import CommitLog
from store.errors import StorageFull
from store.key_index import KeyIndex
from store.key_entries import ATTRIBUTES_LOW, KeyColumns, index_entries
from store.key_worker import KeyWorker, KeyWorkerError
from store.partition import Partition
from store.transactions import Transactions

log = logging.getLogger(__name__)
IDLE_S = 0.05  # the dispatcher's nap when it has caught up: each wake-up takes the GIL from the event loop
# Indexing keys is per-record Python work (about 3 us a record) on the GIL the event loop needs:
# a turn works for at most TURN_S (whole entries), then the thread sleeps so that it takes at
# most BUSY_SHARE of the time. A broker taking 300,000 records/s outruns it: the index falls
# behind under such load and catches up afterwards (RocketMQ's dispatch runs behind then too),
# and a lookup says how far behind it is.
BUSY_SHARE = 0.08
TURN_S = 0.002
MIN_NAP_S = 0.05  # between turns: at most 20 wake-ups a second while there is work
WORKER_NAP_S = 0.25  # between the key worker's ranges while the writer is busy (0.05 s: e2e p99 2-2.8 ms, 0.25 s: 1.3-1.7 ms)


def tags_of(part: Partition, batch) -> np.ndarray | None:
    """The per-record tag hashes `to_queue` needs for a topic with `tag.header`, else None.
    The append path takes them before it writes, so a batch whose records do not parse is
    refused with nothing written."""
    return None if part.tag_header is None else records.tag_hashes(batch, part.tag_header)


_EPOCH = struct.Struct(">i")


def note_epoch(part: Partition, batch, base_offset: int) -> None:
    """A batch someone else appended (recovery, a follower): its partitionLeaderEpoch field
    says which leader wrote it; a newer epoch starts at its base offset."""
    epoch = _EPOCH.unpack_from(batch, 12)[0]
    if epoch > part.epochs.latest_epoch:
        part.epochs.assign(epoch, base_offset)


def to_queue(part: Partition, base_offset: int, record_count: int, batch_position: int, batch_size: int,
             tags: np.ndarray | None, max_timestamp: int) -> None:
    """Derive the consume-queue entries of one entry (its space already reserved) and move the
    partition's high watermark past it."""
    q = part.queue
    if tags is None:
        q.put(base_offset, record_count, batch_position, batch_size)
    else:
        q.put_tagged(base_offset, record_count, batch_position, batch_size, tags)
    q.high_watermark = base_offset + record_count
    if part.time_index is not None:
        part.time_index.note(base_offset, max_timestamp, base_offset + record_count)


TXN_BITS = TRANSACTIONAL_BIT | CONTROL_BIT
_PRODUCER_ID = struct.Struct(">q")  # at 43 in a batch


def transactions_of(part: Partition) -> Transactions:
    txns = part.txns
    if txns is None:
        txns = part.txns = Transactions(part.queue.directory)
    return txns


def reserve_marker(part: Partition) -> None:
    """Before a control batch is written: room for the index entry it may add (StorageFull)."""
    transactions_of(part).reserve()


def to_transactions(part: Partition, batch, base_offset: int) -> None:
    """Derive one transactional or control batch (the caller tested `batch[ATTRIBUTES_LOW] &
    TXN_BITS`, and reserved with `reserve_marker` before a control batch was written): a data
    batch opens its producer's transaction at its base offset unless one is open; a marker
    (Kafka's EndTransactionMarker: COMMIT or ABORT) closes it, an ABORT into the index.
    Control records of other types change nothing."""
    txns = transactions_of(part)
    producer_id = _PRODUCER_ID.unpack_from(batch, 43)[0]
    if not batch[ATTRIBUTES_LOW] & CONTROL_BIT:
        txns.begin(producer_id, base_offset)
        return
    kind = marker_type(batch)
    if kind is not None:
        txns.end(producer_id, base_offset, kind == ABORT_MARKER, part.hw is not None)


def marker_type(batch) -> int | None:
    """ABORT_MARKER or COMMIT_MARKER for a transaction marker, None for another control record."""
    recs = records.cleaner_records(batch)[1]
    key = recs[0].key if recs else None
    if key is None or len(key) < CONTROL_KEY.size:
        return None
    version, kind = CONTROL_KEY.unpack_from(key)
    return kind if version == 0 and kind in (ABORT_MARKER, COMMIT_MARKER) else None


REDERIVE_STEP = 1 << 20  # queue entries looked at a time


def rederive_transactions(part: Partition, commitlog: CommitLog) -> None:
    """Derive the partition's transactions again from its live batches, in offset order: a
    compacted queue's batches lie out of offset order in the commitlog (relocated copies),
    and a truncated log may have lost markers that closed transactions."""
    txns = part.txns
    if txns is not None:
        txns.reset()
    q = part.queue
    last_position = -1
    for start in range(q.log_start, q.high_watermark, REDERIVE_STEP):
        _, positions, sizes = q.live(start, min(start + REDERIVE_STEP, q.high_watermark))
        first = np.ones(len(positions), dtype=bool)  # each batch's first entry
        first[1:] = positions[1:] != positions[:-1]
        if len(positions) and positions[0] == last_position:
            first[0] = False
        for position, size in zip(positions[first].tolist(), sizes[first].tolist()):
            batch = commitlog.view(position, size) if size > 0 else None
            if batch is not None and batch[ATTRIBUTES_LOW] & TXN_BITS:
                if batch[ATTRIBUTES_LOW] & CONTROL_BIT:
                    reserve_marker(part)
                to_transactions(part, batch, _SPAN.unpack_from(batch, 0)[0])
        if len(positions):
            last_position = int(positions[-1])


_SPAN = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")


def relocate(part: Partition, batch, batch_position: int, batch_size: int,
             kept: np.ndarray | None = None, tags: np.ndarray | None = None) -> None:
    """Derive a relocated batch (entry flag RELOCATED, written by the log cleaner,
    store/compaction.py): the offsets of its records point at it, and the other offsets of
    the span it keeps (baseOffset .. baseOffset + lastOffsetDelta) become gaps. Kept entries
    change first, so a concurrent read sees each offset's old or new batch, never a gap
    where a record lives. In recovery the batch it replaces may be gone with its segment:
    then the span is new to the queue (the offsets before it stay gaps). The log cleaner
    passes the kept offsets and tag hashes it already has (`kept`, `tags`), so the per-record
    work stays outside the append lock it calls this under."""
    q = part.queue
    base = _SPAN.unpack_from(batch, 0)[0]
    stop = base + _LAST_DELTA.unpack_from(batch, 23)[0] + 1
    if kept is None:
        kept, tags = records.record_offsets(batch), tags_of(part, batch)
    q.ensure(base, stop - base)  # recovery only: files for offsets below or beyond those derived so far
    q.high_watermark = max(q.high_watermark, stop)  # recovery only: the original's segment was deleted
    q.repoint(kept, -1, batch_position, batch_size, tags)
    q.repoint(np.setdiff1d(np.arange(base, stop, dtype=np.int64), kept), -1, 0, 0)
    part.time_index = None
    part.relocated = True


WORKER_ENTRIES = 4096  # entries per request to the key worker: the insert after it stays short
WORKER_BYTES = 1 << 20  # ... and commitlog bytes: a range takes the worker a few ms (a batch can hold 1 MB)


class KeyDispatcher:
    """Follows the commitlog and indexes record keys (RocketMQ's ReputMessageService for the
    index file). `position` is the commitlog position below which every entry is indexed."""

    def __init__(self, commitlog: CommitLog, index: KeyIndex, position: int,
                 indexed: Callable[[str, int, bytes], bool], any_indexed: Callable[[], bool],
                 indexed_ids: Callable[[], frozenset[bytes]] = frozenset) -> None:
        self._log = commitlog
        self._index = index
        self.position = max(position, commitlog.min_position)
        self._indexed = indexed  # (topic, partition, topic id): are this entry's keys indexed?
        self._any_indexed = any_indexed  # does any live topic index keys?
        self._indexed_ids = indexed_ids  # the topic ids whose keys are indexed (for the worker)
        self.use_worker = True  # walk in the key worker process (False: in this thread)
        self.lock = threading.Lock()  # held while the index changes: checkpoints take it for a consistent mark
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._full_logged = 0.0

    def start(self) -> None:
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="key-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def behind(self) -> int:
        """Commitlog bytes written but not indexed yet."""
        return max(0, self._log.write_position - self.position)

    def wait_caught_up(self, timeout: float) -> int:
        """Wait until everything written before the call is indexed, at most `timeout` seconds;
        returns the bytes still behind."""
        target = self._log.write_position
        deadline = time.monotonic() + timeout
        while self.position < target and time.monotonic() < deadline and self._thread is not None:
            time.sleep(0.001)
        return max(0, target - self.position)

    def _run(self) -> None:
        worker: KeyWorker | None = None
        try:
            while not self._stopping:
                began = time.perf_counter()
                remote = False
                try:
                    if self.use_worker and worker is None and self._any_indexed():
                        # once a key-indexed topic exists (before its first records, so its start-up
                        # does not compete with them); a broker without topics runs no second process
                        worker = KeyWorker.start()
                    remote = self.use_worker and worker is not None and worker.alive
                    written = self._log.write_position
                    progressed = self.dispatch_remote(worker) if remote else self.dispatch_some(budget_s=TURN_S)
                except StorageFull as exc:
                    now = time.monotonic()
                    if now - self._full_logged > 10:
                        self._full_logged = now
                        log.warning("key index: out of disk space, keys are indexed again once there is room: %s", exc)
                    time.sleep(1.0)
                    continue
                except KeyWorkerError as exc:  # the worker died or could not start: this thread walks, throttled
                    log.warning("key worker unavailable (%s); indexing keys in the broker process meanwhile", exc)
                    if worker is not None:
                        worker.close()
                    worker = KeyWorker.unavailable(retry_after_s=10.0)
                    continue
                except Exception:  # never let the thread die silently: lookups would fall behind forever
                    log.exception("key dispatcher failed at commitlog position %d; retrying", self.position)
                    time.sleep(1.0)
                    continue
                if worker is not None and not worker.alive and worker.retry_due():
                    worker = None  # try to start it again
                if not progressed:
                    time.sleep(IDLE_S)
                elif remote:
                    if self._log.write_position != written:  # the writer is busy: a range per nap, so
                        # the worker (on the other core, or the same one's SMT sibling) takes a small
                        # share; once the writer rests, the index catches up at full speed
                        time.sleep(WORKER_NAP_S)
                else:  # yield most of the time (and the GIL) to the event loop, in few
                    # long naps: each wake-up takes the GIL from the event loop, so waking often
                    # costs it latency
                    time.sleep(max(MIN_NAP_S, (time.perf_counter() - began) * (1 - BUSY_SHARE) / BUSY_SHARE))
        finally:
            if worker is not None:
                worker.close()

    def dispatch_some(self, max_entries: int = 1 << 30, budget_s: float | None = None) -> bool:
        """Index, in this thread, the keys of the entries after `position`: up to `max_entries`
        of them, and with a budget, whole entries until it is spent; True if it moved. The
        thread's own loop hands the walk to the key worker process instead (store/key_worker.py);
        this is the fallback when that process cannot run, and what tests call directly."""
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        step = self._next_range()
        if not isinstance(step, tuple):
            return step
        seg, start, stop, rolled, seen = step
        with self.lock:
            if self.position != seen:
                return True  # truncated meanwhile: walk again from there
            local, keys = index_entries(seg, start, stop, rolled, self._indexed, max_entries, deadline)
            self._add(keys)
            return self._moved_to(seg.start + local)

    def dispatch_remote(self, worker) -> bool:
        """The same, with the walk done by the key worker process: this thread only sends a range
        and adds what comes back (a few numpy calls), so per-record work leaves the event loop's
        GIL. Raises what the worker raised (KeyWorkerError: the caller falls back)."""
        step = self._next_range()
        if not isinstance(step, tuple):
            return step
        seg, start, stop, rolled, seen = step
        ids = self._indexed_ids()
        local, keys = worker.index(seg.path, seg.start, seg.size, start, stop, rolled, ids, WORKER_ENTRIES,
                                   WORKER_BYTES)
        with self.lock:
            if self.position != seen or self._log.min_position > seg.start + start:
                return True  # truncated, or retention deleted the segment meanwhile: walk again
            self._add(keys)
            return self._moved_to(seg.start + local)

    def _next_range(self):
        """(segment, local start, local stop, has the writer rolled past it, the position it
        was computed from) to walk next, or a bool when there is nothing to walk (True: the
        position moved anyway)."""
        end = self._log.write_position  # every entry below it is completely written
        seen = self.position
        start = max(seen, self._log.min_position)
        if start >= end:
            if start != self.position:
                self.position = start
            return False
        if not self._any_indexed():
            self.position = end
            return True
        seg = self._log.segment_at(start)
        if seg is None:
            self.position = end
            return True
        return seg, start - seg.start, min(seg.size, end - seg.start), seg.end <= end, seen

    def _add(self, keys: KeyColumns) -> None:
        if len(keys[0]):
            self._index.add_many(*keys)  # a full disk stops here (StorageFull), before any write

    def _moved_to(self, position: int) -> bool:
        moved = position != self.position
        self.position = position
        return moved

    def mark(self) -> tuple[tuple[int, int], int]:
        """(the key index's mark, the position it covers), consistent with each other."""
        with self.lock:
            return self._index.mark(), self.position
