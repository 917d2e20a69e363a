"""The one dispatcher: what a commitlog entry becomes in the derived files.

RocketMQ derives every file beside the commitlog with one chain (CommitLogDispatcher: consume
queue, index file, ...) driven by ReputMessageService. Here:

* `to_queue` is the synchronous step, run by the append path (so a fetch sees a record at once),
  by recovery for every scanned entry, and by a follower applying shipped commitlog bytes:
  consume-queue entries (tag hashes for topics with `tag.header`), the high watermark, and the
  time index.
* `KeyDispatcher` is the asynchronous step, off the write path: a thread that follows the
  commitlog from the position the key index covers to the write position and indexes the keys
  of records of topics with `key.index.enable` (on by default, as RocketMQ's
  messageIndexEnable). A lookup waits a moment for it to catch up and otherwise says how far
  it is behind.

Never does network I/O; reads the commitlog only through the CommitLog it is given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from store import records
from store.commitlog import CommitLog
from store.entry import EntryHeader
from store.errors import StorageFull
from store.key_index import KeyIndex
from store.partition import Partition
from store.segment_walk import Ending, Tail, walk

log = logging.getLogger(__name__)
IDLE_S = 0.005  # the dispatcher's nap when it has caught up (RocketMQ's reput sleeps 1 ms)
# While the writer is busy, the dispatcher takes at most this share of the time (the GIL it
# shares with the event loop): indexing keys is per-record Python work, about 3 us a record,
# more than a broker taking 300,000 records/s could spare. It falls behind under such load and
# catches up when the load drops (RocketMQ's dispatch also runs behind then); a lookup says so.
BUSY_SHARE = 0.08
CHUNK_ENTRIES = 32  # entries per turn: a turn holds the GIL for a few milliseconds at most


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
                 indexed: Callable[[EntryHeader], str | None]) -> None:
        self._log = commitlog
        self._index = index
        self.position = max(position, commitlog.min_position)
        self._indexed = indexed  # the entry's topic name if its keys are indexed, else None
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
            writer = self._log.write_position
            began = time.perf_counter()
            try:
                progressed = self.dispatch_some(CHUNK_ENTRIES)
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
            elif self._log.write_position != writer:  # the writer is busy: yield most of the time to it
                time.sleep((time.perf_counter() - began) * (1 - BUSY_SHARE) / BUSY_SHARE)

    def dispatch_some(self, max_entries: int = 4096) -> bool:
        """Index the keys of up to `max_entries` entries after `position`; True if it moved."""
        end = self._log.write_position  # every entry below it is completely written
        start = max(self.position, self._log.min_position)
        if start >= end:
            if start != self.position:
                self.position = start
            return False
        seg = self._log.segment_at(start)
        if seg is None:
            self.position = end
            return True
        stop = min(seg.size, end - seg.start)
        with self.lock:
            position = start
            for done, item in enumerate(walk(seg, stop, start=start - seg.start), 1):
                if isinstance(item, Tail):
                    position = seg.end if item.kind == Ending.BLANK else seg.start + item.local
                    break
                if isinstance(item, EntryHeader):
                    topic = self._indexed(item)
                    if topic is not None:
                        batch = self._log.view(item.batch_position, item.batch_size)
                        keys = records.keyed_records(batch) if batch is not None else []
                        if keys:
                            self._index.reserve(len(keys))  # a full disk stops here, before any write
                            for delta, key in keys:
                                self._index.add(records.key_hash(topic, key), item.batch_position,
                                                item.store_timestamp, delta)
                    position = item.position + item.length
                else:  # a corrupt region: nothing to index in it
                    position = item.end
                if done >= max_entries:
                    break
            moved = position != self.position
            self.position = position
        return moved

    def mark(self) -> tuple[tuple[int, int], int]:
        """(the key index's mark, the position it covers), consistent with each other."""
        with self.lock:
            return self._index.mark(), self.position
