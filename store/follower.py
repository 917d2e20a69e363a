"""What a leader ships and a follower applies (RocketMQ's HAService; Kafka's ReplicaFetcherThread).

A mixin of Store (store/store.py), over the attributes Store.__init__ sets; it holds no state of
its own and imports nothing of store/store.py. It owns:

* shipping: the commitlog as a leader reads it for a follower (read_log, read_log_tail,
  log_segment_file, log_end_position, log_start_position);
* applying: a follower writes the shipped entries byte for byte and derives them as an append
  does (append_replicated, and the splice path: splice_target, apply_spliced,
  splice_write_error, discard_spliced), the slave's commitlog apply of RocketMQ's HA and the
  log append of Kafka's ReplicaFetcherThread;
* starting over from the master's copy (start_over, finish_start_over), truncation
  (truncate_log) and a follower's retention (follow_retention);
* high watermarks in a broker group (replicate, replicated_to, set_high_watermark) and the
  master epochs of the log (master_epochs, begin_master_epoch).

docs/storage.md, *Shipping the commitlog*, and docs/replication.md describe the protocol.
"""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

from store import recovery
from store.atomic_file import fsync_dir, replace
from store.checkpoint import queue_key
from store.data_dir import START_OVER_FILE, discard_derived_and_log
from store.dispatch import (
    ATTRIBUTES_LOW,
    CONTROL_BIT,
    TXN_BITS,
    note_epoch,
    rederive_transactions,
    relocate,
    reserve_marker,
    tags_of,
    to_queue,
    to_transactions,
)
from store.entry import ENTRY_AT_BATCH, RELOCATED, EntryHeader, read_entry
from store.errors import ReplicationError, StorageFull, StoreError
from store.partition import Partition
from store.replica import Unreplicated
from store.segment import Segment
from store.state import MASTER_EPOCH, STATE_TOPIC, decode_master_epoch, encode_master_epoch

log = logging.getLogger(__name__)


class FollowerLog:
    # ---- high watermarks in a broker group (store/replica.py) ------------------------
    def replicate(self, following: bool) -> None:
        """Take part in a broker group (broker/cluster/node.py): high watermarks from now on move
        only by `replicated_to`, and a follower (`following`) writes nothing of its own
        (retention and the log cleaner leave the commitlog to its master). Every partition whose
        log end is past its high watermark waits for the whole present log to be replicated."""
        with self._lock:
            if self._unreplicated is None:
                self._unreplicated = Unreplicated()
            self.following = following
            self._unreplicated.pending_from(self._all_partitions(), self._log.write_position)

    def replicated_to(self, position: int) -> None:
        """The in-sync replicas hold the commitlog below `position`: the high watermarks of the
        partitions written below it move to their entries' next offsets (store/replica.py),
        and fetches waiting on them are woken."""
        with self._lock:
            if self._unreplicated is None:
                return
            moved = self._unreplicated.advance(position)
            for part in moved:
                if part.txns is not None:
                    part.txns.replicated(part.hw)
        keys = [(part.topic, part.index) for part in moved if not part.internal]
        if keys:
            for callback in self._subscribers:
                callback(keys)

    def set_high_watermark(self, topic: str, partition: int, offset: int | None) -> int:
        """Replication moves the high watermark (None: follow the log end again); kept within
        [log start, log end] and never moved back. Returns it."""
        part = self._partition(topic, partition)
        q = part.queue
        with self._lock:
            if offset is None:
                part.hw = None
            else:
                offset = max(q.log_start, min(offset, q.high_watermark))
                part.hw = offset if part.hw is None else max(part.hw, offset)
            if part.txns is not None:
                part.txns.replicated(part.hw)
            return q.high_watermark if part.hw is None else part.hw

    # ---- master epochs ---------------------------------------------------------------
    def master_epochs(self) -> list[tuple[int, int]]:
        """(master epoch, commitlog position it began at) of every epoch a master of this log
        started (begin_master_epoch), oldest first: where a returning follower's log and its
        master's part (broker/cluster/state.py's truncation_point)."""
        return sorted(decode_master_epoch(key, value) for key, value in self.state_items(MASTER_EPOCH))

    def begin_master_epoch(self, epoch: int) -> int:
        """This store becomes its group's master in `epoch`: a state record says where in the
        commitlog the epoch begins (replicated like every record, so each replica knows the
        epochs of the log it holds), and every partition is led in that epoch from its log end
        (Kafka's leader epoch). Made durable before returning; returns the start position."""
        with self._state_lock:  # nothing else appends: the node serves as master only after this
            start = self._log.write_position
            self._write_state_locked([encode_master_epoch(epoch, start)])
        with self._lock:
            self._default_epoch = epoch
            for part in self._all_partitions():
                if not part.internal:
                    part.epochs.assign(epoch, part.queue.high_watermark)
                    part.leader_epoch = max(part.leader_epoch, epoch)
        self._make_durable()
        return start

    # ---- what a leader ships ---------------------------------------------------------
    @property
    def log_end_position(self) -> int:
        """The commitlog write position: where a follower's next shipped entries go."""
        return self._log.write_position

    @property
    def log_start_position(self) -> int:
        """The commitlog's first position (retention moves it)."""
        return self._log.min_position

    def read_log(self, position: int, max_bytes: int) -> tuple[int, memoryview]:
        """Whole commitlog entries from `position` for a follower, as a view over the mmap
        (CommitLog.read_entries)."""
        return self._log.read_entries(position, max_bytes)

    def log_segment_file(self, position: int) -> tuple[Path, int, int] | None:
        """(the file of the commitlog segment holding `position`, the positions it starts and
        ends at), None when no segment holds it: for a caller that sends what read_log or
        read_log_tail gave it (one segment's bytes) from the file (sendfile) rather than from
        the mapping."""
        seg = self._log.segment_at(position)
        return None if seg is None else (seg.path, seg.start, seg.end)

    def read_log_tail(self, position: int, max_bytes: int) -> memoryview | None:
        """read_log's quick case without I/O or a walk over entries, None when it does not
        apply (CommitLog.read_tail): a master calls it on its event loop for a follower close
        behind, and read_log in a worker thread otherwise."""
        return self._log.read_tail(position, max_bytes)

    # ---- what a follower applies -----------------------------------------------------
    def applies_in_place(self, data: bytes | bytearray, end: int | None = None) -> bool:
        """May a follower apply these shipped entries (data[:end]) on its event loop
        (append_replicated without a worker thread), as a master appends a produced batch on its
        own? Yes unless one of them is a state record (a topic's record makes its queue files,
        and every state record is reconciled against the registry) or this store is starting
        over. Every entry's header holds its topic's id, so one bytes search for the state
        topic's id answers without a walk over entries; the id turning up inside a record's
        bytes only sends the chunk to a worker thread."""
        if self._start_over is not None:
            return False
        return data.find(self._parts[STATE_TOPIC][0].topic_id, 0, end) < 0

    def splice_target(self, position: int, length: int) -> tuple[int, int] | None:
        """Where a follower may splice shipped bytes [position, position+length) into the
        commitlog's file before it applies them with apply_spliced (CommitLog.splice_target):
        (descriptor, offset), or None when they take append_replicated's way from a buffer (the
        leader rolled to a new segment, the disk has no room for them, the log directory is
        offline). Called on the event loop without the append lock (see there)."""
        if self.offline is not None:
            return None
        try:
            return self._log.splice_target(position, length)
        except (StorageFull, OSError):  # append_replicated meets it and says so
            return None

    def applies_spliced_in_place(self, position: int, length: int) -> bool:
        """applies_in_place for bytes spliced into the commitlog's file."""
        seg = self._log.segment_at(position)
        local = position - seg.start if seg is not None else 0
        return seg is not None and self._start_over is None and \
            seg.find(self._parts[STATE_TOPIC][0].topic_id, local, local + length) < 0

    def apply_spliced(self, position: int, length: int) -> int:
        """append_replicated for shipped bytes already spliced into the commitlog's file at
        `position` (splice_target): read, checked and derived from the mapping, in the same
        way, and the write position moves past them."""
        view = self._log.view(position, length)
        if view is None or len(view) != length:
            raise ReplicationError(f"spliced bytes at commitlog position {position} are not in this log")
        return self.append_replicated(position, view, written=True)

    def splice_write_error(self, exc: OSError) -> StoreError:
        """The error to raise for a failed write of spliced bytes (the log directory goes offline
        as with any failed commitlog write; StorageFull for a full disk)."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StorageFull(str(exc))
        with self._lock:
            return self._set_offline(exc, "write")

    def discard_spliced(self) -> None:
        """Zero bytes spliced into the commitlog's file and never applied (the stream ended)."""
        with self._lock:
            try:
                self._log.discard_spliced()
            except OSError as exc:
                raise self._set_offline(exc, "write") from exc

    def append_replicated(self, position: int, data: bytes | memoryview, written: bool = False) -> int:
        """Apply commitlog entries shipped by a leader: written byte for byte at `position`,
        then derived by the same dispatcher as an append (store/dispatch.py: consume queues now,
        keys by the key dispatcher). Entries of topics this store does not know (or another
        incarnation of) are kept in the commitlog and not derived, as recovery does. State
        records (topics, offsets) are applied as they come: the chunk is applied in pieces that
        end at each state entry, so a topic created by the leader exists before its first
        batch. Every entry must continue its partition (base offset = its high watermark),
        checked before a piece is written: ReplicationError otherwise (a diverged log:
        truncate first). `written`: the bytes already lie in the file at `position` (`data`
        is this log's mapping of them, apply_spliced). Returns the new write position."""
        if self._start_over is not None:
            return self._append_copy(position, data, written)
        view = memoryview(data)
        state_id = self._parts[STATE_TOPIC][0].topic_id
        local = piece = 0
        end = self._log.write_position
        headers: list[EntryHeader] = []  # each entry is read and CRC-checked here, once
        while local < len(view):
            e = read_entry(view, local, position)
            if not isinstance(e, EntryHeader):
                raise ReplicationError(f"shipped bytes at commitlog position {position + local} are not a valid entry")
            local += e.length
            headers.append(e)
            if e.topic_id == state_id or local == len(view):
                end = self._apply_shipped(position + piece, view[piece:local], headers, written)
                if e.topic_id == state_id:
                    with self._state_lock:
                        self._view.apply_batch(self._log.view(e.batch_position, e.batch_size), e.base_offset)
                    self._reconcile()
                piece = local
                headers = []
        return end

    def _apply_shipped(self, position: int, view: memoryview, entries: list[EntryHeader], written: bool) -> int:
        """Write one piece of shipped entries (read and checked by append_replicated) and derive it.
        Each entry's partition is looked up once, and its batch is read from the shipped bytes,
        which are the written ones: at 10,000 partitions an entry is a ~1 KiB batch, and
        a second lookup and a view over the mmap per entry were a fifth of a follower's work."""
        with self._lock:
            if self.offline is not None:
                raise self.offline
            derived: list[tuple[EntryHeader, Partition, memoryview]] = []  # offsets validated before writing
            markers: list[Partition] = []  # control batches: room for an aborted-index entry each
            next_offsets: dict[int, int] = {}
            find = self._find
            for e in entries:
                part = find(e.topic, e.partition)
                if part is None or part.topic_id != e.topic_id:
                    continue  # kept in the commitlog, not derived (as recovery does)
                at = e.position - position + ENTRY_AT_BATCH
                batch = view[at:at + e.batch_size]
                derived.append((e, part, batch))
                if e.flags & RELOCATED:
                    continue
                expected = next_offsets.get(id(part), part.queue.high_watermark)
                if e.base_offset != expected:
                    raise ReplicationError(f"{e.topic}-{e.partition}: shipped offset {e.base_offset}, this log "
                                           f"is at {expected}: the logs diverged; truncate to the last common position")
                next_offsets[id(part)] = e.base_offset + e.record_count
                part.queue.reserve(e.base_offset, e.record_count)  # disk blocks before any byte is written
                if batch[ATTRIBUTES_LOW] & CONTROL_BIT:
                    markers.append(part)
            for part in markers:
                reserve_marker(part)
            try:
                self._log.append_raw(position, view, entries, written)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise StorageFull(str(exc)) from exc
                raise self._set_offline(exc, "write") from exc
            unreplicated = self._unreplicated
            touched = []
            last_ts = self._last_ts
            for e, part, batch in derived:
                batch_position = e.position + ENTRY_AT_BATCH
                if e.flags & RELOCATED:  # the leader's cleaner moved these offsets' records
                    relocate(part, batch, batch_position, len(batch))
                    continue
                note_epoch(part, batch, e.base_offset)
                to_queue(part, e.base_offset, e.record_count, batch_position, len(batch), tags_of(part, batch),
                         e.max_timestamp)
                if unreplicated is not None:
                    unreplicated.add(e.position + e.length, part, e.base_offset + e.record_count)
                if batch[ATTRIBUTES_LOW] & TXN_BITS:
                    to_transactions(part, batch, e.base_offset)
                touched.append(part)
                last_ts = max(last_ts, e.store_timestamp)
            self._last_ts = last_ts
            end = self._log.write_position
        if unreplicated is None:  # in a broker group readers wait for the high watermark: replicated_to wakes them
            # (on the caller's thread; a follower applies in a worker thread, its event loop calls replicated_to)
            keys = [(part.topic, part.index) for part in dict.fromkeys(touched)]
            if keys:
                for callback in self._subscribers:
                    callback(keys)
        return end

    def follow_retention(self, master_start: int) -> int:
        """A follower deletes the segments wholly below its master's first commitlog position:
        the master's retention deleted them, and carried their live state records (shipped
        since). Returns how many segments went."""
        if not self.following:
            return 0
        count = self._drop_segments_below(master_start)
        if count:
            self.write_checkpoint()
        return count

    # ---- starting over from the master's copy ----------------------------------------
    @property
    def starting_over(self) -> int | None:
        """While this follower starts over (start_over): the position its copy is derived at."""
        return None if self._start_over is None else self._start_over[0]

    def replica_bounds(self) -> tuple[int, int, dict[str, tuple[int, int]]]:
        """(first commitlog position, write position, each queue's (log start, log end) by
        queue key), taken together under the append lock: what a follower that starts over
        from this log's first position needs besides its bytes (start_over)."""
        with self._lock:
            ids = {meta.name: str(meta.topic_id) for meta in recovery.metas(self._registry)}
            queues = {queue_key(ids[p.topic], p.index): (p.queue.log_start, p.queue.high_watermark)
                      for p in self._all_partitions() if p.topic in ids}
            return self._log.min_position, self._log.write_position, queues

    def start_over(self, position: int, end: int, queues: dict[str, tuple[int, int]]) -> None:
        """Discard this follower's commitlog and everything derived from it, and hold an empty
        commitlog from `position`, its master's first position: its log ends below that (the
        master's retention deleted what it lacks), as Kafka's follower truncates fully and
        fetches from the leader's log start. The master's entries are then written as they come
        (append_replicated) and derived once the copy reaches `end` (finish_start_over), by a
        rebuild as recovery does: a topic's state record, carried forward by the master's
        retention, can follow batches of the topic. `queues` are the master's queue bounds at
        `end` (replica_bounds), for partitions the copy holds no entry of. A restart before the
        copy is derived finds START_OVER_FILE and discards the partial copy (_open)."""
        if not self.following:
            raise StoreError("only a follower starts over from its master's copy")
        copy = (end, dict(queues))
        self._start_over = copy  # no reads from here on (broker/cluster/node.py: serves_reads)
        with self._admin_lock:
            self._stop_threads()
            with self._lock:
                self._log.close()
            discard_derived_and_log(self.root)
            replace(self.root / START_OVER_FILE, json.dumps({"position": position, "end": end}).encode())
            (self.root / "commitlog").mkdir()
            Segment.create(self.root / "commitlog", position, self.config.segment_bytes,
                           prezero=self.config.flush_mode == "sync").drop(unlink=False)
            self._reopen(start_over=copy)
        log.warning("commitlog discarded: it ended below the master's first position %d; copying the master's "
                    "commitlog from there (derived once the copy reaches %d)", position, end)

    def _append_copy(self, position: int, data: bytes | memoryview, written: bool) -> int:
        """Write shipped entries while starting over: checked and written, not derived yet."""
        with self._lock:
            if self.offline is not None:
                raise self.offline
            try:
                self._log.append_raw(position, data, written=written)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise StorageFull(str(exc)) from exc
                raise self._set_offline(exc, "write") from exc
            return self._log.write_position

    def finish_start_over(self) -> None:
        """The copy reached the position start_over was given: derive everything from it (the
        queues the copy has no entry of as the master had them there; log starts no lower than
        the master's), then forget the start-over."""
        assert self._start_over is not None
        _, queues = self._start_over
        with self._admin_lock:
            self._stop_threads()
            with self._lock:
                self._log.flush(self._log.min_position, self._log.write_position)
                self._log.close()
            for name in ("checkpoint", "clean_shutdown"):
                (self.root / name).unlink(missing_ok=True)
            self._reopen(queues)
            ids = {meta.name: str(meta.topic_id) for meta in recovery.metas(self._registry)}
            with self._lock:
                for part in self._all_partitions():
                    bound = queues.get(queue_key(ids[part.topic], part.index)) if part.topic in ids else None
                    if bound is not None and part.queue.log_start < bound[0] <= part.queue.high_watermark:
                        part.queue.advance_log_start(bound[0])
            self.write_checkpoint(every_queue=True)
            (self.root / START_OVER_FILE).unlink()
            fsync_dir(self.root)
        log.info("the master's commitlog copied from %d to %d and derived", self.log_start_position,
                 self.log_end_position)

    def _reopen(self, bounds: dict[str, tuple[int, int]] | None = None,
                start_over: tuple[int, dict[str, tuple[int, int]]] | None = None) -> None:
        """Recover this store again from its files (its threads stopped, its commitlog closed),
        keeping its subscribers, its data directory lock and its part in a broker group. A
        follower serves no read until `following` is set again, after the rest."""
        subscribers, dir_lock, following = self._subscribers, self._dir_lock, self.following
        self._open(self.root, self.config, into=self, bounds=bounds)
        self._subscribers, self._dir_lock, self._start_over = subscribers, dir_lock, start_over
        if following:
            self.replicate(following=True)

    # ---- truncation ------------------------------------------------------------------
    def truncate_log(self, position: int) -> None:
        """Cut the commitlog back to `position`, an entry boundary (a returning old leader, or a
        follower whose log diverged): every partition's high watermark goes back to the first
        offset at or after it, its queue entries beyond are cleared, and the key index drops
        what points there. A checkpoint follows."""
        with self._admin_lock:
            with self._lock, self._keys.lock:
                self._log.truncate_to(position)
                for part in self._all_partitions():
                    q = part.queue
                    hw = q.first_offset_at_or_after(position)
                    cut = hw < q.high_watermark
                    if cut:
                        q.clear_after(hw)
                        q.high_watermark = hw
                        q.log_start = min(q.log_start, hw)
                        part.time_index = None
                        part.epochs.truncate_from_end(hw)
                    if part.hw is not None:
                        part.hw = min(part.hw, hw)
                    if cut and part.txns is not None:  # a marker cut off reopens its transaction
                        rederive_transactions(part, self._log)
                self._key_index.truncate_from(position)
                self._keys.position = min(self._keys.position, position)
            with self._state_lock:  # the state as the remaining records say
                self._view.reset()
                recovery.replay_state(self._parts[STATE_TOPIC][0].queue, self._log, self._view)
            self._reconcile()
            if self._unreplicated is not None:
                with self._lock:
                    self._unreplicated.pending_from(self._all_partitions(), self._log.write_position)
            self.write_checkpoint(every_queue=True)
