"""The transaction coordinator's I/O (issue 19): carries out the plans of broker/txn/state.py.

Every transition is a record of the state topic, fsynced before the request is answered, so the
coordinator's state lives in the commitlog with the rest (recovered, retained and replicated on
the same path). Markers are control batches appended to each partition of the transaction
(Store.append_control), which closes the producer's open transaction there and, for an abort,
adds it to the partition's aborted-transactions index. Offsets sent with TxnOffsetCommit wait as
pending state records (key `o` + producer id + the offset's key) and become committed offsets
when the transaction commits, or go when it aborts. In a cluster of several broker groups, the
offsets of a consumer group that another group's master coordinates are sent there (clients send
TxnOffsetCommit to the consumer group's coordinator, as Kafka's do): that master keeps them
pending (`stage_group_offsets`) until this coordinator's marker for them arrives
(`complete_group_offsets`, from WriteTxnMarkers).

Disk work (state writes, markers) runs in worker threads; one trio lock orders the transitions.
At start, transactions left prepared are completed; a timer task aborts transactions older
than their timeout (`transaction.abort.timed.out.transaction.cleanup.interval.ms`, as Kafka).
"""

from __future__ import annotations

import logging
import struct
import time

import trio

from broker.txn.state import (
    MAX_EPOCH,
    PENDING_OFFSETS_PREFIX,
    TXN_PREFIX,
    Answer,
    Coordinator,
    Plan,
    Txn,
)
from protocol.errors import ErrorCode
from store import StoreError, UnknownPartition, UnknownTopic
from store.state import GROUP_PENDING_OFFSET, encode_offset, offset_key

log = logging.getLogger("gregor.txn")
_PID = struct.Struct(">q")
_PID_EPOCH = struct.Struct(">qh")


def now_ms() -> int:
    return int(time.time() * 1000)


class TxnCoordinator:
    # In a cluster of several broker groups (broker/cluster/node.py): sends the markers of partitions
    # other groups serve to their masters (raising a StoreError if one is not written, which
    # leaves the transaction prepared, retried), and returns the partitions to mark here.
    markers_elsewhere = None
    # In a broker group: called once markers are appended here, as after a produce (the master's
    # high watermark moves at once when it is alone in the sync-state set, and followers are
    # woken). Without it a transaction's markers stayed above the high watermark, and its records
    # unreadable to read_committed consumers, until the next append to the log.
    appended = None

    def __init__(self, store, producers, max_timeout_ms: int, check_interval_ms: int) -> None:
        self.store = store
        self.producers = producers
        self.state = Coordinator(max_timeout_ms)
        self.check_interval_s = check_interval_ms / 1000
        self.lock = trio.Lock()
        for key, value in store.state_items(TXN_PREFIX):
            self.state.load(Txn.decode(key[len(TXN_PREFIX):].decode(), value))

    async def run(self) -> None:
        """Finish what a crash (or a failed write) left prepared, then, every check interval, abort
        timed-out transactions and retry what is still prepared."""
        while True:
            async with self.lock:
                for plan in self.state.unfinished():
                    await self._attempt(plan)
                for plan in self.state.expired(now_ms()):
                    log.info("aborting transaction %s of producer %d: older than its timeout of %d ms",
                             plan.txn.transactional_id, plan.txn.producer_id, plan.txn.timeout_ms)
                    await self._attempt(plan)
            await trio.sleep(self.check_interval_s)

    async def _attempt(self, plan: Plan) -> None:
        try:
            await self._carry_out(plan)
        except StoreError as exc:  # a full disk, an offline log dir: left prepared, tried again later
            log.error("transaction %s not completed yet: %s", plan.txn.transactional_id, exc)

    # --- requests (each holds the lock across its state change and the writes it needs) ----

    async def init_producer_id(self, tid: str, timeout_ms: int, pid_hint: int, epoch_hint: int) -> Answer:
        async with self.lock:
            new_ids: list[int] = []
            if tid not in self.state.txns or self.state.txns[tid].producer_epoch >= MAX_EPOCH:
                # a producer id, reserved durably, before the state machine hands it out
                new_ids.append(await trio.to_thread.run_sync(self.producers.allocate_producer_id))
            answer = self.state.init_producer_id(tid, timeout_ms, pid_hint, epoch_hint, now_ms(), new_ids.pop)
            return await self._answer(answer)

    async def change(self, decide) -> Answer:
        """Run one state-machine call (`decide(now_ms)`) and carry out its plan."""
        async with self.lock:
            return await self._answer(decide(now_ms()))

    async def _answer(self, answer: Answer) -> Answer:
        if answer.plan is None:
            return answer
        try:
            await self._carry_out(answer.plan)
        except StoreError as exc:
            # as Kafka when its transaction log refuses an append: the client retries; the
            # transaction is as last made durable (a prepared one is finished by `run`)
            log.error("transaction %s: state not stored: %s", answer.plan.txn.transactional_id, exc)
            self._restore(answer.plan.txn)
            return Answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return answer

    def _restore(self, txn: Txn) -> None:
        stored = self.store.state_value(txn.key())
        self.state.by_producer.pop(txn.producer_id, None)
        self.state.txns.pop(txn.transactional_id, None)
        if stored is not None:
            self.state.load(Txn.decode(txn.transactional_id, stored))

    async def commit_offsets(self, tid: str, pid: int, epoch: int, group: str,
                             offsets: list[tuple[str, int, int, str | None, int]]) -> int:
        """TxnOffsetCommit: the offsets wait as pending records until the transaction ends."""
        async with self.lock:
            error = self.state.offsets_allowed(tid, pid, epoch, group)
            if error:
                return error
            return self._write_pending(PENDING_OFFSETS_PREFIX + _PID.pack(pid), group, offsets, f"transaction {tid}")

    def stage_group_offsets(self, pid: int, epoch: int, group: str,
                            offsets: list[tuple[str, int, int, str | None, int]]) -> int:
        """TxnOffsetCommit of a transaction another broker group's master coordinates, for a
        consumer group this master coordinates: pending until that coordinator's marker (Kafka's
        group coordinator likewise keeps a producer's transactional offsets pending until the
        marker, and does not ask the transaction coordinator). The producer's epoch is kept: a
        commit marker makes only offsets of its own epoch committed, so a fenced producer's late
        offsets never are (Kafka refuses them by the epoch its offsets partition last saw)."""
        return self._write_pending(GROUP_PENDING_OFFSET + _PID_EPOCH.pack(pid, epoch), group, offsets,
                                   f"producer {pid}")

    def _write_pending(self, prefix: bytes, group: str, offsets: list[tuple[str, int, int, str | None, int]],
                       whose: str) -> int:
        """Pending offsets, each under `prefix` + its offset key: an append, durable with the
        transaction's end or the marker that commits them (the commitlog is durable as a prefix)."""
        records = [(prefix + offset_key(group, topic, partition), encode_offset(offset, metadata, leader_epoch))
                   for topic, partition, offset, metadata, leader_epoch in offsets]
        try:
            self.store.write_state(records, durable=False)
        except StoreError as exc:
            log.error("%s: offsets of group %s not stored: %s", whose, group, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return 0

    def complete_group_offsets(self, pid: int, epoch: int, commit: bool) -> None:
        """The marker of `stage_group_offsets`' offsets: a commit makes those of `epoch` committed;
        every pending offset of the producer up to `epoch` goes (an abort fences with epoch + 1).
        Raises a StoreError when the state topic refuses the records. On the event loop: an
        append (its durability is the replication the caller waits for)."""
        records: list[tuple[bytes, bytes | None]] = []
        for key, value in self.store.state_items(GROUP_PENDING_OFFSET + _PID.pack(pid)):
            _, staged_epoch = _PID_EPOCH.unpack_from(key, len(GROUP_PENDING_OFFSET))
            if staged_epoch > epoch:
                continue
            records.append((key, None))
            if commit and staged_epoch == epoch:
                records.append((key[len(GROUP_PENDING_OFFSET) + _PID_EPOCH.size:], value))
        if records:
            self.store.write_state(records, durable=False)

    # --- carrying out a plan ----------------------------------------------------------------

    async def _carry_out(self, plan: Plan) -> None:
        """Write the transition, then the markers, then the Complete state with the offsets, and
        make it all durable with one fsync. The commitlog is durable as a prefix, so a crash
        anywhere in between leaves the transaction Ongoing (nothing written), or prepared with
        some markers (finished by `run` at the next start), or complete. A failure leaves the
        transaction prepared: retried by `run` (or raised to the request, which answers an error
        and the client retries)."""
        txn = plan.txn
        record = [(txn.key(), txn.encode())]
        if plan.durable and not plan.complete:
            await trio.to_thread.run_sync(self.store.write_state, record)
            return
        self.store.write_state(record, durable=False)  # an append, no disk wait: on the event loop
        if not plan.complete:
            return
        markers = plan.markers
        if self.markers_elsewhere is not None:  # partitions (and consumer groups) of other broker groups:
            # their masters write them
            markers = await self.markers_elsewhere(markers, sorted(txn.groups), txn.producer_id, txn.producer_epoch,
                                                   plan.commit)
        # Markers are appended on the event loop, as produce appends (an append wakes waiting fetches).
        for topic, partition in markers:
            try:
                self.store.append_control(topic, partition, txn.producer_id, txn.producer_epoch, plan.commit)
            except (UnknownTopic, UnknownPartition):
                pass  # deleted meanwhile: nothing there to mark
        if markers and self.appended is not None:
            self.appended()
        done = self.state.completed(txn, now_ms())
        await trio.to_thread.run_sync(self._complete, done.txn, plan.commit)
        log.info("transaction %s of producer %d %s over %d partition(s)", txn.transactional_id, txn.producer_id,
                 "committed" if plan.commit else "aborted", len(plan.markers))

    def _complete(self, txn: Txn, commit: bool) -> None:
        """One durable write: the pending offsets become committed (or go) with the Complete state."""
        prefix = PENDING_OFFSETS_PREFIX + _PID.pack(txn.producer_id)
        pending = self.store.state_items(prefix)
        records = [(key, None) for key, _ in pending]
        if commit:
            records += [(key[len(prefix):], value) for key, value in pending]
        self.store.write_state([*records, (txn.key(), txn.encode())])

    def describe(self, tid: str) -> Txn | None:
        return self.state.txns.get(tid)

    def listing(self) -> list[Txn]:
        return list(self.state.txns.values())

