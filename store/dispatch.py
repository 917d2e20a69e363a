"""The one dispatcher: what a commitlog entry becomes in the derived files.

RocketMQ derives every file beside the commitlog with one chain (CommitLogDispatcher: consume
queue, index file, ...) driven by ReputMessageService. Here:

* `to_queue` is the synchronous step, run by the append path (so a fetch sees a record at once),
  by recovery for every scanned entry, and by a follower applying shipped commitlog bytes:
  consume-queue entries (tag hashes for topics with `tag.header`), the high watermark, and the
  time index.
* `KeyDispatcher` is the asynchronous step, off the write path: a thread that follows the
  commitlog from the position the key index covers to the write position and indexes the keys
  of records of topics with `key.index.enable=true` (off by default: see store/partition.py's
  features). A lookup waits a moment for it to catch up and otherwise says how far it is
  behind.

Never does network I/O; reads the commitlog only through the CommitLog it is given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from store import entry as E
from store import records
from store.commitlog import CommitLog
from store.errors import StorageFull
from store.key_index import KeyIndex
from store.partition import Partition
from store.segment_walk import resync

log = logging.getLogger(__name__)
IDLE_S = 0.005  # the dispatcher's nap when it has caught up (RocketMQ's reput sleeps 1 ms)
# Indexing keys is per-record Python work (about 3 us a record) on the GIL the event loop needs:
# a turn works for at most TURN_S (whole entries), then the thread sleeps so that it takes at
# most BUSY_SHARE of the time. A broker taking 300,000 records/s outruns it: the index falls
# behind under such load and catches up afterwards (RocketMQ's dispatch runs behind then too),
# and a lookup says how far behind it is.
BUSY_SHARE = 0.08
TURN_S = 0.002
MIN_NAP_S = 0.05  # between turns: at most 20 wake-ups a second while there is work


def tags_of(part: Partition, batch) -> np.ndarray | None:
    """The per-record tag hashes `to_queue` needs for a topic with `tag.header`, else None.
    The append path takes them before it writes, so a batch whose records do not parse is
    refused with nothing written."""
    return None if part.tag_header is None else records.tag_hashes(batch, part.tag_header)


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


class KeyDispatcher:
    """Follows the commitlog and indexes record keys (RocketMQ's ReputMessageService for the
    index file). `position` is the commitlog position below which every entry is indexed."""

    def __init__(self, commitlog: CommitLog, index: KeyIndex, position: int,
                 indexed: Callable[[str, int, bytes], bool], any_indexed: Callable[[], bool]) -> None:
        self._log = commitlog
        self._index = index
        self.position = max(position, commitlog.min_position)
        self._indexed = indexed  # (topic, partition, topic id): are this entry's keys indexed?
        self._any_indexed = any_indexed  # does any live topic index keys?
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
        while not self._stopping:
            began = time.perf_counter()
            try:
                progressed = self.dispatch_some(budget_s=TURN_S)
            except StorageFull as exc:
                now = time.monotonic()
                if now - self._full_logged > 10:
                    self._full_logged = now
                    log.warning("key index: out of disk space, keys are indexed again once there is room: %s", exc)
                time.sleep(1.0)
                continue
            except Exception:  # never let the thread die silently: lookups would fall behind forever
                log.exception("key dispatcher failed at commitlog position %d; retrying", self.position)
                time.sleep(1.0)
                continue
            if not progressed:
                time.sleep(IDLE_S)
            else:  # yield most of the time (and the GIL) to the event loop, in few long naps:
                # each wake-up takes the GIL from the event loop, so waking often costs it latency
                time.sleep(max(MIN_NAP_S, (time.perf_counter() - began) * (1 - BUSY_SHARE) / BUSY_SHARE))

    def dispatch_some(self, max_entries: int = 1 << 30, budget_s: float | None = None) -> bool:
        """Index the keys of the entries after `position`: up to `max_entries` of them, and
        with a budget, whole entries until it is spent; True if it moved. Entries are read by
        their headers only (no CRC: below the write position they were written here, or
        validated by recovery or by append_replicated). With no key-indexed topic at all it
        moves straight to the write position."""
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        end = self._log.write_position  # every entry below it is completely written
        start = max(self.position, self._log.min_position)
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
        stop = min(seg.size, end - seg.start)
        view = seg.view
        unpack_prefix, unpack_header = E.PREFIX.unpack_from, E.ENTRY_HEADER.unpack_from
        with self.lock:
            local = start - seg.start
            done = 0
            while local < stop:
                if stop - local < E.PREFIX_SIZE:
                    local = seg.size if seg.end <= end else local  # unused bytes at a full segment's end
                    break
                length, _crc, magic, _flags, topic_length = unpack_prefix(view, local)
                if magic == E.MAGIC_BLANK or (length == 0 and magic == 0):
                    if seg.end <= end:  # the writer rolled on: the rest of this segment is unused
                        local = seg.size
                    break
                if magic != E.MAGIC_DATA or length < E.HEADER_SIZE + topic_length or local + length > stop:
                    nxt = resync(seg, local, stop)  # bytes recovery marked corrupt: step over them
                    if nxt is None:
                        break
                    local = nxt
                    continue
                fields = unpack_header(view, local)
                topic = bytes(view[local + length - topic_length:local + length]).decode()
                if self._indexed(topic, fields[6], fields[5]):
                    batch_position = seg.start + local + E.HEADER_SIZE
                    keys = records.record_keys(view[local + E.HEADER_SIZE:local + length - topic_length])
                    if keys:
                        self._index.reserve(len(keys))  # a full disk stops here, before any write
                        for delta, key in keys:
                            self._index.add(records.key_hash(topic, key), batch_position, fields[9], delta)
                local += length
                done += 1
                if done >= max_entries or (deadline is not None and time.perf_counter() >= deadline):
                    break
            position = seg.start + local
            moved = position != self.position
            self.position = position
        return moved

    def mark(self) -> tuple[tuple[int, int], int]:
        """(the key index's mark, the position it covers), consistent with each other."""
        with self.lock:
            return self._index.mark(), self.position
