"""broker/txn/state.py: the transaction coordinator's state machine, without a broker (the
same flows run end to end with real clients in tests/transactions/)."""

from __future__ import annotations

import itertools

import pytest

from broker.txn.state import ALLOWED_FROM, Coordinator, IllegalTransition, Txn, TxnState
from protocol.errors import ErrorCode

S = TxnState
T0 = 1_000_000


@pytest.fixture
def coord():
    return Coordinator(max_timeout_ms=900_000)


def ids():
    counter = itertools.count(100)
    return lambda: next(counter)


def begin(coord, tid="tx", now=T0):
    new = ids()
    a = coord.init_producer_id(tid, 60_000, -1, -1, now, new)
    assert a.error == 0
    return a.producer_id, a.producer_epoch, new


def test_a_new_transactional_id_gets_a_producer_id_at_epoch_0_and_a_retry_bumps_the_epoch(coord):
    pid, epoch, new = begin(coord)
    assert (epoch, coord.txns["tx"].state) == (0, S.EMPTY)
    again = coord.init_producer_id("tx", 60_000, -1, -1, T0, new)
    assert (again.error, again.producer_id, again.producer_epoch) == (0, pid, 1)


def test_the_timeout_is_bounded_by_transaction_max_timeout_ms(coord):
    assert coord.init_producer_id("tx", 900_001, -1, -1, T0, ids()).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert coord.init_producer_id("tx", 0, -1, -1, T0, ids()).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_commit_walks_ongoing_prepare_commit_complete_commit_and_writes_a_marker_per_partition(coord):
    pid, epoch, _ = begin(coord)
    add = coord.add_partitions("tx", pid, epoch, [("a", 0), ("b", 1)], T0 + 5)
    assert add.error == 0 and add.plan.txn.state is S.ONGOING and coord.txns["tx"].start_ms == T0 + 5
    end = coord.end_txn("tx", pid, epoch, True, T0 + 10)
    assert end.error == 0 and end.plan.markers == (("a", 0), ("b", 1)) and end.plan.commit and end.plan.complete
    assert coord.txns["tx"].state is S.PREPARE_COMMIT
    assert coord.add_partitions("tx", pid, epoch, [("a", 0)], T0 + 11).error == ErrorCode.CONCURRENT_TRANSACTIONS
    done = coord.completed(coord.txns["tx"], T0 + 12)
    assert done.txn.state is S.COMPLETE_COMMIT and not done.txn.partitions
    assert coord.end_txn("tx", pid, epoch, True, T0 + 13).error == 0  # a retried EndTxn
    assert coord.end_txn("tx", pid, epoch, False, T0 + 13).error == ErrorCode.INVALID_TXN_STATE


def test_end_txn_without_a_transaction_is_an_invalid_state_and_wrong_ids_are_refused(coord):
    pid, epoch, _ = begin(coord)
    assert coord.end_txn("tx", pid, epoch, True, T0).error == ErrorCode.INVALID_TXN_STATE
    assert coord.end_txn("tx", pid + 1, epoch, True, T0).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert coord.end_txn("nope", pid, epoch, True, T0).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert coord.add_partitions("tx", pid, epoch + 1, [("a", 0)], T0).error == ErrorCode.PRODUCER_FENCED


def test_a_new_producer_instance_fences_the_old_one_and_aborts_its_transaction(coord):
    pid, epoch, new = begin(coord)
    coord.add_partitions("tx", pid, epoch, [("a", 0)], T0)
    zombie_fenced = coord.init_producer_id("tx", 60_000, -1, -1, T0 + 1, new)
    assert zombie_fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS  # the client retries
    plan = zombie_fenced.plan
    assert (plan.markers, plan.commit, plan.txn.state, plan.txn.producer_epoch) == ((("a", 0),), False,
                                                                                  S.PREPARE_ABORT, epoch + 1)
    coord.completed(plan.txn, T0 + 2)
    retried = coord.init_producer_id("tx", 60_000, -1, -1, T0 + 3, new)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (0, pid, epoch + 2)
    assert coord.end_txn("tx", pid, epoch, True, T0 + 4).error == ErrorCode.PRODUCER_FENCED
    assert coord.verify(pid, epoch, "a", 0) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_kip_360_a_stale_epoch_hint_is_fenced(coord):
    pid, epoch, new = begin(coord)
    assert coord.init_producer_id("tx", 60_000, pid, epoch + 5, T0, new).error == ErrorCode.PRODUCER_FENCED
    bumped = coord.init_producer_id("tx", 60_000, pid, epoch, T0, new)
    assert (bumped.error, bumped.producer_epoch) == (0, epoch + 1)


def test_an_ongoing_transaction_older_than_its_timeout_is_aborted_with_a_bumped_epoch(coord):
    pid, epoch, _ = begin(coord)
    coord.add_partitions("tx", pid, epoch, [("a", 0)], T0)
    assert coord.next_deadline() == T0 + 60_000
    assert coord.expired(T0 + 59_999) == []
    (plan,) = coord.expired(T0 + 60_000)
    assert (plan.commit, plan.txn.state, plan.txn.producer_epoch) == (False, S.PREPARE_ABORT, epoch + 1)


def test_produce_verification_needs_the_partition_in_the_ongoing_transaction(coord):
    pid, epoch, _ = begin(coord)
    assert coord.verify(pid, epoch, "a", 0) == ErrorCode.INVALID_TXN_STATE
    coord.add_partitions("tx", pid, epoch, [("a", 0)], T0)
    assert coord.verify(pid, epoch, "a", 0) == 0
    assert coord.verify(pid, epoch, "a", 1) == ErrorCode.INVALID_TXN_STATE
    assert coord.verify(pid + 99, 0, "a", 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_offsets_need_the_group_added_to_the_ongoing_transaction(coord):
    pid, epoch, _ = begin(coord)
    assert coord.offsets_allowed("tx", pid, epoch, "g") == ErrorCode.INVALID_TXN_STATE
    assert coord.add_offsets("tx", pid, epoch, "g", T0).error == 0
    assert coord.offsets_allowed("tx", pid, epoch, "g") == 0


def test_the_record_round_trips_and_prepared_transactions_are_finished_after_a_restart(coord):
    pid, epoch, _ = begin(coord)
    coord.add_partitions("tx", pid, epoch, [("a", 0)], T0)
    coord.add_offsets("tx", pid, epoch, "g", T0)
    coord.end_txn("tx", pid, epoch, False, T0 + 1)
    txn = coord.txns["tx"]
    back = Txn.decode("tx", txn.encode())
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions, back.groups, back.start_ms) == (
        pid, epoch, S.PREPARE_ABORT, {("a", 0)}, {"g"}, T0)
    restarted = Coordinator(900_000)
    restarted.load(back)
    (plan,) = restarted.unfinished()
    assert (plan.markers, plan.commit, plan.complete) == ((("a", 0),), False, True)


def test_the_transition_table_refuses_what_kafka_refuses():
    txn = Txn("tx", 1, 0, 1000)
    with pytest.raises(IllegalTransition):
        txn.transition_to(S.PREPARE_COMMIT, T0)  # Empty -> PrepareCommit
    assert S.ONGOING in ALLOWED_FROM[S.PREPARE_ABORT] and S.PREPARE_EPOCH_FENCE in ALLOWED_FROM[S.PREPARE_ABORT]
