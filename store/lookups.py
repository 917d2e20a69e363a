"""Lookups by key, message id and timestamp (RocketMQ's IndexService and viewMessage; Kafka's time index).

A mixin of Store (store/store.py), over the attributes Store.__init__ sets; it holds no state of
its own and imports nothing of store/store.py. It owns:

* key lookups (lookup_key) over the key index (store/key_index.py), which the key dispatcher
  fills off the write path, asking this mixin which topics have their keys indexed
  (_keys_indexed, _any_keys_indexed, _key_indexed_ids);
* message ids (message_id, lookup_message_id: store/msgid.py's encoding of a record's place
  in the commitlog) and decoding one record there (_record_at), which shows only live,
  committed records;
* the time index (offset_for_timestamp, max_timestamp_offset: ListOffsets by timestamp,
  store/time_index.py) and the tag hashes of a partition's entries (tag_hashes);
* the web console's reads (broker/console/): a partition's records from an offset with their
  message ids (records_from), the batch bytes its log holds (partition_bytes) and the
  commitlog's (commitlog_bytes).
"""

from __future__ import annotations

import struct

import numpy as np

from protocol.record_batch import HEADER as BATCH_HEADER
from store import msgid, records
from store.consume_queue import CORRUPT
from store.entry import ENTRY_AT_BATCH, ENTRY_HEADER, MAGIC_DATA, crc_of
from store.errors import CorruptData, OffsetOutOfRange
from store.partition import Partition, features
from store.records import StoredRecord
from store.time_index import TimeIndex, max_timestamp_offset, offset_for_timestamp

_BASE = struct.Struct(">q")  # a batch's base offset, its first field
KEY_LOOKUP_WAIT_S = 1.0  # lookup_key waits at most this long for the key index to reach the log's end


class Lookups:
    # ---- timestamps and tags (store/time_index.py) -----------------------------------
    def tag_hashes(self, topic: str, partition: int, start: int, stop: int) -> np.ndarray:
        """Tag hashes (int64) of offsets [start, stop); a view over the queue when possible."""
        return self._partition(topic, partition).queue.entries(start, stop)["tag"]

    def _time_index(self, part: Partition) -> TimeIndex:
        ti = part.time_index
        if ti is None or ti.covered < part.queue.log_start:
            ti = TimeIndex(part.queue.log_start)
            ti.extend(part.queue, self._log, part.queue.high_watermark)
            with self._lock:
                ti.extend(part.queue, self._log, part.queue.high_watermark)
                part.time_index = ti
        return ti

    def offset_for_timestamp(self, topic: str, partition: int, ts: int) -> tuple[int, int]:
        part = self._partition(topic, partition)
        return offset_for_timestamp(self._time_index(part), part.queue, self._log, ts)

    def max_timestamp_offset(self, topic: str, partition: int) -> tuple[int, int]:
        part = self._partition(topic, partition)
        return max_timestamp_offset(self._time_index(part), part.queue, self._log)

    # ---- key and message-id lookups --------------------------------------------------
    def lookup_key(self, topic: str, key: bytes, begin_ms: int, end_ms: int,
                   max_hits: int = 32, wait_s: float | None = None) -> list[StoredRecord]:
        """Records of `topic` with `key` stored in [begin_ms, end_ms], newest first. Keys are
        indexed off the write path: this waits up to `wait_s` (KEY_LOOKUP_WAIT_S) for the index
        to reach what was written before the call; `key_index_behind()` then says how far it
        still is."""
        meta = self._registry.get(topic)
        self._keys.wait_caught_up(KEY_LOOKUP_WAIT_S if wait_s is None else wait_s)
        hits: list[StoredRecord] = []
        for pos, delta in self._key_index.candidates(records.key_hash(topic, key), begin_ms, end_ms):
            rec = self._record_at(pos, delta)
            if rec is not None and rec.key == key and rec.topic == topic and \
                    self._entry_topic_id(pos) == meta.topic_id.bytes and self._is_live(rec, pos):
                hits.append(rec)
                if len(hits) >= max_hits:
                    break
        return hits

    def _is_live(self, rec: StoredRecord, batch_position: int) -> bool:
        """Does the record's queue entry point at this copy of it? Not when the log cleaner
        removed it (superseded) or moved it (the key index holds both copies)."""
        part = self._find(rec.topic, rec.partition)
        return part is not None and part.queue.entry(rec.offset)[0] == batch_position

    def key_index_behind(self) -> int:
        """Commitlog bytes written but not yet key-indexed (0 when caught up)."""
        return self._keys.behind()

    def _keys_indexed(self, topic: str, partition: int, topic_id: bytes) -> bool:
        """The dispatcher's question: are this entry's keys indexed (this incarnation of its topic)?"""
        part = self._find(topic, partition)
        return part is not None and part.key_indexed and part.topic_id == topic_id

    def _any_keys_indexed(self) -> bool:
        return bool(self._key_indexed_ids())

    def _key_indexed_ids(self) -> frozenset[bytes]:
        """The topic ids whose keys are indexed: the key worker's `_keys_indexed`."""
        return frozenset(meta.topic_id.bytes for meta in list(self._registry.topics.values())
                         if features(meta.configs)[1])

    def lookup_message_id(self, msg_id: str) -> StoredRecord | None:
        decoded = msgid.decode(msg_id)
        if decoded is None or decoded[0] != self.config.node_id:
            return None
        return self._record_at(decoded[1], decoded[2])

    def _entry_topic_id(self, batch_position: int) -> bytes | None:
        view = self._log.view(batch_position - ENTRY_AT_BATCH, ENTRY_HEADER.size)
        return None if view is None else ENTRY_HEADER.unpack_from(view)[5]

    def _record_at(self, batch_position: int, offset_delta: int) -> StoredRecord | None:
        """Decode one record by position; None if gone, dead (deleted topic) or not a record."""
        head = self._log.view(batch_position - ENTRY_AT_BATCH, ENTRY_HEADER.size)
        if head is None or len(head) < ENTRY_HEADER.size:
            return None
        length, head_crc, magic, _, tlen, topic_id, partition, base, _, _, _ = ENTRY_HEADER.unpack_from(head)
        if magic != MAGIC_DATA or offset_delta < 0:  # a relocated batch holds fewer records than it spans
            return None
        entry = self._log.view(batch_position - ENTRY_AT_BATCH, length)
        if entry is None or len(entry) < length or crc_of(entry, 0, length) != head_crc:
            return None  # gone, or damaged at rest: a lookup never decodes corrupt bytes
        topic = bytes(entry[length - tlen:]).decode()
        meta = self._registry.topics.get(topic)
        if meta is None or meta.topic_id.bytes != topic_id:
            return None
        part = self._find(topic, partition)
        if part is None or base + offset_delta < part.queue.log_start:
            return None
        batch = entry[ENTRY_AT_BATCH:length - tlen]
        if not self._committed(part, batch, base + offset_delta):
            return None
        for r in records.decode(batch):
            if r.offset == base + offset_delta:
                return StoredRecord(topic, partition, r.offset, r.timestamp, r.key, r.value,
                                    list(r.headers), msgid.encode(self.config.node_id, batch_position,
                                                                  offset_delta))
        return None

    def message_id(self, topic: str, partition: int, offset: int) -> str:
        """The message id of a stored record."""
        q = self._partition(topic, partition).queue
        if not q.log_start <= offset < q.high_watermark:
            raise OffsetOutOfRange(f"{topic}-{partition} offset {offset}")
        pos, size = q.entry(offset)
        if size == CORRUPT:
            raise CorruptData(topic, partition, offset, q.corrupt_until(offset))
        view = self._log.view(pos, size)
        if view is None:
            raise OffsetOutOfRange(f"{topic}-{partition} offset {offset}")
        return msgid.encode(self.config.node_id, pos, offset - _BASE.unpack_from(view, 0)[0])

    # ---- the web console's reads (broker/console/) --------------------------------------
    def records_from(self, topic: str, partition: int, offset: int, limit: int,
                     max_bytes: int = 1 << 20) -> list[StoredRecord]:
        """Up to `limit` records at or after `offset` that a read_committed consumer may see (no
        marker, no record of an aborted or open transaction), each with its message id; reads at
        most 16 chunks of `max_bytes`, so a caller's wait is bounded however sparse the records."""
        part = self._partition(topic, partition)
        q = part.queue
        offset = max(offset, q.log_start)
        found: list[StoredRecord] = []
        for _ in range(16):
            if offset >= q.high_watermark or len(found) >= limit:
                break
            batches = self.read(topic, partition, offset, max_bytes, committed=True).batches
            if not batches:
                break
            for batch in batches:
                for r in records.decode(batch):
                    if r.offset >= offset and self._committed(part, batch, r.offset):
                        found.append(StoredRecord(topic, partition, r.offset, r.timestamp, r.key, r.value,
                                                  list(r.headers), self.message_id(topic, partition, r.offset)))
                        if len(found) >= limit:
                            return found
                base, _, _, _, _, _, last_delta = BATCH_HEADER.unpack_from(batch)[:7]
                offset = max(offset, base + last_delta + 1)
        return found

    def partition_bytes(self, topic: str, partition: int, most: int = 1_000_000) -> tuple[int, bool]:
        """(batch bytes the partition's log holds, exact?). Every record's entry names its whole
        batch, so a batch counts once, where its entries' position changes. Past `most` entries
        only the newest `most` are read and their bytes per record scaled to the whole log."""
        q = self._partition(topic, partition).queue
        start, end = q.log_start, q.high_watermark
        first = max(start, end - most)
        _, positions, sizes = q.live(first, end)
        if not len(positions):
            return 0, first == start
        first_of_batch = np.empty(len(positions), dtype=bool)
        first_of_batch[0] = True
        np.not_equal(positions[1:], positions[:-1], out=first_of_batch[1:])
        counted = int(np.clip(sizes[first_of_batch], 0, None).astype(np.int64).sum())  # CORRUPT: -1
        if first == start:
            return counted, True
        return counted * (end - start) // (end - first), False

    def commitlog_bytes(self) -> int:
        """Bytes the commitlog holds, every topic's together (from its oldest segment to its end)."""
        return self._log.write_position - self._log.min_position
