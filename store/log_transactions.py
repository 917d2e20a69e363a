"""A partition log's transactions: markers, last stable offset, aborted/open ones (Kafka's LSO, .txnindex).

A mixin of Store (store/store.py), over the attributes Store.__init__ sets; it holds no state of
its own and imports nothing of store/store.py. It answers from each partition's Transactions
(store/transactions.py, derived by the dispatcher): append_control writes a COMMIT or ABORT
marker, last_stable_offset, aborted_transactions and open_transactions answer Fetch,
ListOffsets and DescribeProducers, and _committed / aborted_batch say whether a record is one
a read_committed consumer may see (the lookups by key and message id show only those).
Not the transaction coordinator's log (broker/txn/).
"""

from __future__ import annotations

import struct
import time

from protocol.record_batch import TRANSACTIONAL_BIT, end_transaction_marker, parse_header
from store.dispatch import ATTRIBUTES_LOW, CONTROL_BIT, TXN_BITS
from store.partition import Partition
from store.results import AppendResult

_PRODUCER_ID = struct.Struct(">q")  # at 43
_time_ns = time.time_ns


class LogTransactions:
    # ---- transactions (store/transactions.py) ----------------------------------------
    def append_control(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int = 0) -> AppendResult:
        """Append a transaction marker (COMMIT or ABORT) for the producer, as Kafka's leader
        writes it when the coordinator ends a transaction: it closes the producer's open
        transaction in the partition, and an ABORT enters it into the aborted index. Raises
        what `append` raises."""
        batch = end_transaction_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                       _time_ns() // 1_000_000)
        return self.append(topic, partition, batch, parse_header(batch))

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The offset below which no record belongs to an open transaction: the first offset
        of the oldest open one (not below the log start), or the high watermark if lower."""
        part = self._partition(topic, partition)
        hw = part.queue.high_watermark if part.hw is None else part.hw
        return hw if part.txns is None else part.txns.last_stable(part.queue.log_start, hw)

    def aborted_transactions(self, topic: str, partition: int, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a fetch of [start, end)
        overlaps (marker at or after `start`, first offset before `end`), by first offset."""
        txns = self._partition(topic, partition).txns
        return [] if txns is None else txns.collect(start, end)

    def open_transactions(self, topic: str, partition: int) -> dict[int, int]:
        """Producer id -> first offset of its open transaction in the partition (a copy)."""
        txns = self._partition(topic, partition).txns
        return {} if txns is None else txns.open.copy()

    def _committed(self, part: Partition, batch, offset: int) -> bool:
        """Is the record at `offset` of `batch` one a read_committed consumer may see? Lookups by key
        and by message id show only those: never a transaction marker, a record of an aborted
        transaction or of one still open (issue 19)."""
        attributes = batch[ATTRIBUTES_LOW]
        if not attributes & TXN_BITS:  # neither transactional nor a marker: the common case
            return True
        if attributes & CONTROL_BIT or offset >= self.last_stable_offset(part.topic, part.index):
            return False
        return not self.aborted_batch(part.topic, part.index, batch, offset, offset + 1)

    def aborted_batch(self, topic: str, partition: int, batch, start: int, stop: int) -> bool:
        """Is `batch` (its records in [start, stop)) a batch of an aborted transaction: transactional,
        and its producer's aborted range covers it?"""
        if not batch[ATTRIBUTES_LOW] & TRANSACTIONAL_BIT:
            return False
        pid = _PRODUCER_ID.unpack_from(batch, 43)[0]
        return any(p == pid for p, _ in self.aborted_transactions(topic, partition, start, stop))
