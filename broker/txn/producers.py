"""Idempotent-producer state: producer-id allocation and per-partition
sequence checks, following Kafka's ProducerStateManager.

Per (topic, partition, producer id) it keeps the epoch and the last five
batches, so that a retried batch is answered with its original offset instead
of being appended twice. Producer ids come from blocks reserved durably in the
commitlog (a record of the store's state topic), so they stay unique across
restarts and travel with the commitlog to a replica.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from protocol.errors import ErrorCode
from protocol.record_batch import CONTROL_BIT, BatchHeader, parse_header
from store import CorruptData
from store.state import PRODUCER_IDS, PRODUCER_SNAPSHOT, decode_i64, encode_i64

BATCHES_KEPT = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
ID_BLOCK = 1000


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))


class Verdict(Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    verdict: Verdict
    error: ErrorCode = ErrorCode.NONE
    duplicate_of: BatchMetadata | None = None


APPEND = SequenceCheck(Verdict.APPEND)


class ProducerStateTable:
    def __init__(self, store) -> None:
        self._entries: dict[tuple[str, int, int], ProducerEntry] = {}
        self._store = store
        self._next_id = 0
        self._block_end = 0

    # -- producer ids ------------------------------------------------------
    # In a cluster (broker/cluster/zk.py): reserve_block(size, floor) takes the next block of producer ids
    # no broker group has had, at or above floor, and returns its start. Blocking.
    reserve_block = None

    def allocate_producer_id(self) -> int:
        """A never-used producer id. Reserves a block first: the block's end, as a state
        record, is durable in the commitlog before any id of it is handed out. Blocking."""
        if self._next_id >= self._block_end:
            stored = self._store.state_value(PRODUCER_IDS)
            start = max(0 if stored is None else decode_i64(stored), self._next_id)
            if self.reserve_block is not None:  # a cluster: blocks disjoint across broker groups
                start = self.reserve_block(ID_BLOCK, start)
            end = start + ID_BLOCK
            if not self._store.following:  # a follower's block is durable in ZooKeeper alone
                self._store.write_state([(PRODUCER_IDS, encode_i64(end))])
            self._next_id, self._block_end = start, end
        pid = self._next_id
        self._next_id += 1
        return pid

    # -- sequence checks ---------------------------------------------------
    def check(self, topic: str, partition: int, header: BatchHeader) -> SequenceCheck:
        if header.producer_id < 0:
            return APPEND
        entry = self._entries.get((topic, partition, header.producer_id))
        if entry is None:
            return APPEND  # unknown producer: Kafka accepts any sequence
        if header.producer_epoch < entry.epoch:
            return SequenceCheck(Verdict.REJECT, ErrorCode.INVALID_PRODUCER_EPOCH)
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                return SequenceCheck(Verdict.REJECT, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return APPEND
        for batch in entry.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return SequenceCheck(Verdict.DUPLICATE, duplicate_of=batch)
        last = entry.batches[-1].last_seq if entry.batches else -1
        if header.base_sequence != (last + 1) % 2**31:
            return SequenceCheck(Verdict.REJECT, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return APPEND

    def record(self, topic: str, partition: int, header: BatchHeader, base_offset: int) -> None:
        """Remember an appended batch (also used when rebuilding state from the commitlog); a
        transaction marker (control batch) carries no sequence."""
        if header.producer_id < 0 or header.attributes & CONTROL_BIT:
            return
        key = (topic, partition, header.producer_id)
        entry = self._entries.get(key)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self._entries[key] = ProducerEntry(header.producer_epoch)
        entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence, base_offset,
                                           header.max_timestamp))

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._entries if k[0] == topic]:
            del self._entries[key]


# -- persistence across restarts ----------------------------------------------
# The state is derived from the commitlog: a snapshot (written at clean shutdown and every
# `producer.state.snapshot.interval.ms`) records it together with each partition's log end offset;
# at start the batches appended after those offsets are replayed from the store. Without a
# snapshot every retained batch is replayed. Only batch headers are read, never records.
SNAPSHOT_VERSION = 1
REPLAY_READ_BYTES = 4 * 1024 * 1024


def snapshot_payload(table: ProducerStateTable, end_offsets: dict[tuple[str, str, int], int]) -> bytes:
    """Serialise on the event loop (a consistent view); the caller writes it off the loop."""
    entries = [[topic, partition, pid, entry.epoch,
                [[b.first_seq, b.last_seq, b.base_offset, b.max_timestamp] for b in entry.batches]]
               for (topic, partition, pid), entry in table._entries.items()]
    ends = [[topic, topic_id, partition, end] for (topic, topic_id, partition), end in end_offsets.items()]
    return json.dumps({"version": SNAPSHOT_VERSION, "end_offsets": ends, "entries": entries}).encode()


def write_snapshot(store, payload: bytes) -> None:
    """The snapshot as a state record in the commitlog (the latest one is kept); not waited
    for: a lost snapshot only means more batches replayed at the next start."""
    store.write_state([(PRODUCER_SNAPSHOT, payload)], durable=False)


def restore(table: ProducerStateTable, store) -> int:
    """Load the snapshot if it is readable, then replay newer batches. Returns batches replayed."""
    ends: dict[tuple[str, str, int], int] = {}
    try:
        data = json.loads(store.state_value(PRODUCER_SNAPSHOT) or b"{}")
        if data.get("version") == SNAPSHOT_VERSION:
            ends = {(t, tid, p): end for t, tid, p, end in data["end_offsets"]}
            for topic, partition, pid, epoch, batches in data["entries"]:
                entry = table._entries[(topic, partition, pid)] = ProducerEntry(epoch)
                entry.batches.extend(BatchMetadata(*b) for b in batches)
    except (ValueError, KeyError, TypeError, AttributeError):
        ends = {}
        table._entries.clear()
    replayed = 0
    for meta in store.topics().values():
        for partition in range(meta.partitions):
            start = store.log_start_offset(meta.name, partition)
            offset = max(ends.get((meta.name, str(meta.topic_id), partition), start), start)
            replayed += _replay(table, store, meta.name, partition, offset)
    live = {(m.name, p) for m in store.topics().values() for p in range(m.partitions)}
    for key in [k for k in table._entries if (k[0], k[1]) not in live]:
        del table._entries[key]
    return replayed


def _replay(table: ProducerStateTable, store, topic: str, partition: int, offset: int) -> int:
    count = 0
    # To the log end, past the high watermark: a follower made master holds batches its sync-state
    # set had not acknowledged yet, and a producer retrying one of them must find it a duplicate.
    while offset < store.log_end_offset(topic, partition):
        try:
            batches = store.read(topic, partition, offset, REPLAY_READ_BYTES, whole_log=True).batches
        except CorruptData as exc:  # damaged batches hold no producer state we can trust
            offset = exc.next_offset
            continue
        if not batches:
            break
        for view in batches:
            header = parse_header(view)
            if header.base_offset + header.last_offset_delta < offset:
                continue
            table.record(topic, partition, header, header.base_offset)
            offset = header.base_offset + header.last_offset_delta + 1
            count += 1
    return count
