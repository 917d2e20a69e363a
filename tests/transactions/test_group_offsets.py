"""Transactional offsets held for a transaction another broker group's master coordinates
(broker/txn/coordinator.py: `stage_group_offsets`, `complete_group_offsets`): a commit marker
makes the offsets of its producer epoch committed, an abort drops them, and a fenced producer's
offsets (an older epoch) are never committed. The cluster path is tests/cluster/test_groups.py."""

from __future__ import annotations

from broker.txn.coordinator import TxnCoordinator
from store import Store
from store.state import GROUP_PENDING_OFFSET, decode_offset, offset_key
from tests.store.conftest import tiny_config


def _committed(store: Store, group: str, partition: int) -> int | None:
    value = store.state_value(offset_key(group, "t", partition))
    return None if value is None else decode_offset(value)[0]


def test_a_commit_marker_commits_its_epochs_offsets_and_an_abort_drops_them(tmp_path):
    store = Store.open(tmp_path, tiny_config())
    try:
        txn = TxnCoordinator(store, producers=None, max_timeout_ms=60_000, check_interval_ms=10_000)
        assert txn.stage_group_offsets(7, 0, "g", [("t", 0, 10, "m", -1), ("t", 1, 20, None, 3)]) == 0
        assert _committed(store, "g", 0) is None  # pending until the marker
        txn.complete_group_offsets(7, 0, commit=True)
        assert (_committed(store, "g", 0), _committed(store, "g", 1)) == (10, 20)
        assert decode_offset(store.state_value(offset_key("g", "t", 1))) == (20, None, 3)
        assert txn.stage_group_offsets(7, 0, "g", [("t", 0, 15, "", -1)]) == 0
        txn.complete_group_offsets(7, 0, commit=False)
        assert _committed(store, "g", 0) == 10
        txn.complete_group_offsets(7, 0, commit=True)  # a marker sent again: nothing pending, nothing changes
        assert _committed(store, "g", 0) == 10
        assert store.state_items(GROUP_PENDING_OFFSET) == []
    finally:
        store.close()


def test_a_fenced_producers_late_offsets_are_never_committed(tmp_path):
    store = Store.open(tmp_path, tiny_config())
    try:
        txn = TxnCoordinator(store, producers=None, max_timeout_ms=60_000, check_interval_ms=10_000)
        txn.stage_group_offsets(7, 0, "g", [("t", 0, 10, "", -1)])  # epoch 0's transaction ...
        txn.complete_group_offsets(7, 1, commit=False)  # ... aborted by the fence (epoch 1)
        txn.stage_group_offsets(7, 0, "g", [("t", 0, 99, "", -1)])  # the fenced producer, late
        txn.stage_group_offsets(7, 1, "g", [("t", 1, 30, "", -1)])  # the new one
        txn.complete_group_offsets(7, 1, commit=True)
        assert (_committed(store, "g", 0), _committed(store, "g", 1)) == (None, 30)
        assert store.state_items(GROUP_PENDING_OFFSET) == []  # the late one went with the marker
        txn.stage_group_offsets(8, 2, "g", [("t", 0, 5, "", -1)])  # a later epoch than the marker: kept
        txn.complete_group_offsets(8, 1, commit=True)
        assert _committed(store, "g", 0) is None and len(store.state_items(GROUP_PENDING_OFFSET)) == 1
    finally:
        store.close()
