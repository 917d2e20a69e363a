"""The transaction coordinator's state machine (Kafka's TransactionCoordinator and
TransactionMetadata, issue 19), sans-IO like broker/groups/state.py.

One `Txn` per transactional id: its producer id and epoch, timeout, state, the partitions and
consumer groups of the ongoing transaction, and when it started. `Coordinator` answers the
transactional requests with Kafka's checks and error codes and says what must happen next as
data: a `Plan` of state records to write (each transition is durable before it is answered) and
transaction markers to append. It never touches trio, the store or a clock: every call takes
`now_ms` (wall-clock milliseconds: transaction start times survive a restart), and the caller
(broker/txn/coordinator.py) carries the plan out, then calls `completed`.

States and `ALLOWED_FROM` are Kafka's TransactionState and its validPreviousStates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum

from protocol.errors import ErrorCode
from store.state import PENDING_OFFSET, TRANSACTION

TXN_PREFIX = TRANSACTION  # state key: + UTF-8 transactional id; value: `Txn.encode()`
PENDING_OFFSETS_PREFIX = PENDING_OFFSET  # state key: + producer id (8 bytes) + the offset's state key
# The partition a transaction's markers name for its offsets of a consumer group another broker
# group coordinates (WriteTxnMarkers to that group's master): Kafka's coordinator likewise marks
# the group's partition of its offsets topic.
OFFSETS_MARKER = ("__consumer_offsets", 0)
MAX_EPOCH = 32766  # Kafka bumps to a new producer id past Short.MaxValue - 1


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


S = TxnState
ALLOWED_FROM: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class IllegalTransition(RuntimeError):
    pass


@dataclass(eq=False)
class Txn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = S.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)  # AddOffsetsToTxn: offsets of these groups commit with it
    start_ms: int = -1
    updated_ms: int = -1

    def transition_to(self, target: TxnState, now_ms: int) -> None:
        if self.state not in ALLOWED_FROM[target]:
            raise IllegalTransition(f"transaction {self.transactional_id!r}: {self.state.value} -> {target.value}")
        self.state = target
        self.updated_ms = now_ms

    def encode(self) -> bytes:
        """The state record's value (JSON, version 1: small, rare, and readable in a dump)."""
        return json.dumps({"v": 1, "pid": self.producer_id, "epoch": self.producer_epoch,
                           "timeout": self.timeout_ms, "state": self.state.value,
                           "partitions": sorted(self.partitions), "groups": sorted(self.groups),
                           "start": self.start_ms, "updated": self.updated_ms}).encode()

    @classmethod
    def decode(cls, transactional_id: str, value: bytes) -> Txn:
        d = json.loads(value)
        return cls(transactional_id, d["pid"], d["epoch"], d["timeout"], TxnState(d["state"]),
                   {(t, p) for t, p in d["partitions"]}, set(d["groups"]), d["start"], d["updated"])

    def key(self) -> bytes:
        return TXN_PREFIX + self.transactional_id.encode()


@dataclass(frozen=True, slots=True)
class Plan:
    """What the caller must do, in order: write `txn`'s record, append `markers` (one control
    batch per partition, of the txn's producer id and epoch), then call
    `Coordinator.completed(txn, now)` when `complete` is set and write the Complete state, durable.

    `durable`: the record must be on disk before the answer (a new epoch: a lost one would fence
    the new producer instead of the old). Otherwise a later durable write covers it, since the
    commitlog is durable as a prefix: partitions added to a transaction are on disk before any
    record the producer then writes to them can be, and before its EndTxn is answered."""

    txn: Txn
    markers: tuple[tuple[str, int], ...] = ()
    commit: bool = False
    complete: bool = False
    durable: bool = True


@dataclass(frozen=True, slots=True)
class Answer:
    error: int
    plan: Plan | None = None
    producer_id: int = -1
    producer_epoch: int = -1


class Coordinator:
    """Every transactional id's Txn, and Kafka's answers to the transactional requests."""

    def __init__(self, max_timeout_ms: int) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, Txn] = {}
        self.by_producer: dict[int, Txn] = {}

    def load(self, txn: Txn) -> None:
        """A Txn read back from the state topic at start."""
        self.txns[txn.transactional_id] = txn
        self.by_producer[txn.producer_id] = txn

    # --- InitProducerId ------------------------------------------------------------------

    def init_producer_id(self, tid: str, timeout_ms: int, pid_hint: int, epoch_hint: int, now_ms: int,
                         new_producer_id) -> Answer:
        """`new_producer_id()` hands out a never-used producer id (the caller's durable block)."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return Answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(tid)
        if txn is None:
            txn = Txn(tid, new_producer_id(), 0, timeout_ms, updated_ms=now_ms)
            self.load(txn)
            return Answer(0, Plan(txn), txn.producer_id, 0)
        if txn.state in PREPARED or txn.state is S.PREPARE_EPOCH_FENCE:
            return Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if pid_hint >= 0 and not (pid_hint == txn.producer_id and epoch_hint == txn.producer_epoch):
            return Answer(ErrorCode.PRODUCER_FENCED)  # KIP-360: a producer whose epoch was bumped since
        if txn.state is S.ONGOING:
            # a new instance of the producer: abort what the old one left, fencing it (epoch + 1)
            return Answer(ErrorCode.CONCURRENT_TRANSACTIONS, self._fence_and_abort(txn, now_ms))
        self._bump(txn, new_producer_id)
        txn.timeout_ms = timeout_ms
        txn.transition_to(S.EMPTY, now_ms)
        txn.partitions.clear()
        txn.groups.clear()
        txn.start_ms = -1
        return Answer(0, Plan(txn), txn.producer_id, txn.producer_epoch)

    def _bump(self, txn: Txn, new_producer_id) -> None:
        if txn.producer_epoch >= MAX_EPOCH:
            self.by_producer.pop(txn.producer_id, None)
            txn.producer_id, txn.producer_epoch = new_producer_id(), 0
            self.by_producer[txn.producer_id] = txn
        else:
            txn.producer_epoch += 1

    def _fence_and_abort(self, txn: Txn, now_ms: int) -> Plan:
        txn.transition_to(S.PREPARE_EPOCH_FENCE, now_ms)
        txn.producer_epoch += 1  # markers carry the new epoch: the old producer's writes are fenced
        txn.transition_to(S.PREPARE_ABORT, now_ms)
        return Plan(txn, tuple(sorted(txn.partitions)), commit=False, complete=True)

    # --- the ongoing transaction ----------------------------------------------------------

    def _check(self, tid: str, pid: int, epoch: int) -> tuple[int, Txn | None]:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if txn.state in PREPARED or txn.state is S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return 0, txn

    def add_partitions(self, tid: str, pid: int, epoch: int, partitions: list[tuple[str, int]],
                       now_ms: int) -> Answer:
        error, txn = self._check(tid, pid, epoch)
        if error:
            return Answer(error)
        if txn.state is S.ONGOING and set(partitions) <= txn.partitions:
            return Answer(0)
        self._begin(txn, now_ms)
        txn.partitions.update(partitions)
        return Answer(0, Plan(txn, durable=False))

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, now_ms: int) -> Answer:
        error, txn = self._check(tid, pid, epoch)
        if error:
            return Answer(error)
        if txn.state is S.ONGOING and group in txn.groups:
            return Answer(0)
        self._begin(txn, now_ms)
        txn.groups.add(group)
        return Answer(0, Plan(txn, durable=False))

    def _begin(self, txn: Txn, now_ms: int) -> None:
        if txn.state is not S.ONGOING:
            txn.partitions.clear()
            txn.groups.clear()
            txn.start_ms = now_ms
        txn.transition_to(S.ONGOING, now_ms)

    def offsets_allowed(self, tid: str, pid: int, epoch: int, group: str) -> int:
        """TxnOffsetCommit's check: the producer's current transaction, with the group added."""
        error, txn = self._check(tid, pid, epoch)
        if error:
            return error
        if txn.state is not S.ONGOING or group not in txn.groups:
            return ErrorCode.INVALID_TXN_STATE
        return 0

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, now_ms: int) -> Answer:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != pid:
            return Answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_epoch != epoch:
            return Answer(ErrorCode.PRODUCER_FENCED)
        state = txn.state
        if state is S.ONGOING:
            txn.transition_to(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms)
            return Answer(0, Plan(txn, tuple(sorted(txn.partitions)), commit=commit, complete=True))
        if state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return Answer(0)  # a retried EndTxn
        if state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            return Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        return Answer(ErrorCode.INVALID_TXN_STATE)

    def completed(self, txn: Txn, now_ms: int) -> Plan:
        """The markers of a prepared transaction are written: it is complete."""
        txn.transition_to(S.COMPLETE_COMMIT if txn.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT, now_ms)
        txn.partitions.clear()
        txn.groups.clear()
        return Plan(txn)

    # --- time ----------------------------------------------------------------------------

    def expired(self, now_ms: int) -> list[Plan]:
        """Abort every ongoing transaction older than its timeout, fencing its producer (Kafka's
        abortTimedOutTransactions bumps the epoch)."""
        return [self._fence_and_abort(txn, now_ms) for txn in list(self.txns.values())
                if txn.state is S.ONGOING and txn.start_ms + txn.timeout_ms <= now_ms]

    def unfinished(self) -> list[Plan]:
        """At start: prepared transactions whose markers may not all be written; writing them
        again is harmless (a marker for a producer with nothing open changes nothing)."""
        return [Plan(txn, tuple(sorted(txn.partitions)), commit=txn.state is S.PREPARE_COMMIT, complete=True)
                for txn in self.txns.values() if txn.state in PREPARED]

    def next_deadline(self) -> int | None:
        return min((t.start_ms + t.timeout_ms for t in self.txns.values() if t.state is S.ONGOING), default=None)

    # --- produce verification (KIP-890 part 1) ----------------------------------------------

    def verify(self, pid: int, epoch: int, topic: str, partition: int) -> int:
        """May a transactional batch of this producer go to this partition now?"""
        txn = self.by_producer.get(pid)
        if txn is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < txn.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if txn.state is not S.ONGOING or (topic, partition) not in txn.partitions or epoch != txn.producer_epoch:
            return ErrorCode.INVALID_TXN_STATE
        return 0
