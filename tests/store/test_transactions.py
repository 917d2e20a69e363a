"""Kafka transactions in the store (issue 19, store/transactions.py): open transactions hold the
last stable offset, markers close them, ABORT markers fill the aborted-transactions index, and
the append path, crash recovery, a clean restart, a full rebuild and a follower all derive the
same."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from protocol.record_batch import parse_header
from store import StorageFull, Store, transactions
from store.transactions import ABORTED_INDEX, Transactions
from tests.store.conftest import append, build_batch, crash_to, saved_checkpoint, tiny_config
from tests.store.compacted import COMPACT, _records
from tests.store.txn_history import _write_history, state, txn_batch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def topic(store: Store) -> Store:
    store.create_topic("t", 1, {})
    return store


def test_an_open_transaction_holds_the_last_stable_offset(topic):
    append(topic, "t", 0, build_batch([b"a"]))
    append(topic, "t", 0, txn_batch(7, [b"b", b"c"]))
    append(topic, "t", 0, build_batch([b"d"]))
    append(topic, "t", 0, txn_batch(7, [b"e"], sequence=2))  # the same transaction: it stays open at 1
    assert topic.open_transactions("t", 0) == {7: 1}
    assert topic.last_stable_offset("t", 0) == 1
    assert topic.high_watermark("t", 0) == 5


def test_a_commit_marker_releases_the_last_stable_offset(topic):
    append(topic, "t", 0, txn_batch(7, [b"b", b"c"]))
    result = topic.append_control("t", 0, 7, 0, commit=True)
    assert result.base_offset == result.last_offset == 2
    assert topic.open_transactions("t", 0) == {}
    assert topic.last_stable_offset("t", 0) == 3
    assert topic.aborted_transactions("t", 0, 0, 3) == []


def test_an_abort_marker_enters_the_aborted_index(topic):
    append(topic, "t", 0, build_batch([b"a"]))
    append(topic, "t", 0, txn_batch(7, [b"b", b"c"]))
    topic.append_control("t", 0, 7, 0, commit=False, coordinator_epoch=3)
    assert topic.open_transactions("t", 0) == {}
    assert topic.last_stable_offset("t", 0) == 4
    assert topic.aborted_transactions("t", 0, 0, 4) == [(7, 1)]
    assert (topic._parts["t"][0].queue.directory / ABORTED_INDEX).stat().st_size % 24 == 0


def test_a_marker_is_the_control_batch_kafka_writes(topic):
    append(topic, "t", 0, txn_batch(7, [b"b"]))
    topic.append_control("t", 0, 7, 4, commit=False, coordinator_epoch=9)
    stored = bytes(topic.read("t", 0, 1, 1 << 20).batches[0])
    header = parse_header(stored)
    assert (header.attributes, header.producer_id, header.producer_epoch, header.base_sequence,
            header.record_count, header.base_offset) == (0x30, 7, 4, -1, 1, 1)
    batch = DefaultRecordBatch(stored)
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    [record] = list(batch)
    assert record.key == b"\x00\x00\x00\x00"  # version 0, ABORT
    assert record.value == b"\x00\x00\x00\x00\x00\x09"  # version 0, coordinator epoch 9


class _FullDisk:
    """`os` for store/transactions.py, on a full disk (the rest of the store keeps the real one)."""

    def __getattr__(self, name):
        return getattr(os, name)

    def posix_fallocate(self, *args):
        raise OSError(errno.ENOSPC, "No space left on device (test)")


def test_a_marker_the_aborted_index_has_no_room_for_is_refused_with_nothing_written(topic, monkeypatch):
    append(topic, "t", 0, txn_batch(7, [b"a"]))
    monkeypatch.setattr(transactions, "os", _FullDisk())
    with pytest.raises(StorageFull):
        topic.append_control("t", 0, 7, 0, commit=False)
    assert topic.high_watermark("t", 0) == 1 and topic.open_transactions("t", 0) == {7: 0}
    monkeypatch.undo()  # room again
    topic.append_control("t", 0, 7, 0, commit=False)
    assert topic.aborted_transactions("t", 0, 0, 2) == [(7, 0)]


def test_a_marker_without_an_open_transaction_changes_nothing(topic):
    append(topic, "t", 0, build_batch([b"a"]))
    topic.append_control("t", 0, 7, 0, commit=False)  # an empty transaction: Kafka leaves no trace either
    assert topic.aborted_transactions("t", 0, 0, 10) == []
    assert topic.last_stable_offset("t", 0) == 2


def test_interleaved_producers_each_have_their_own_transaction(topic):
    append(topic, "t", 0, txn_batch(1, [b"a"]))  # 0
    append(topic, "t", 0, txn_batch(2, [b"b"]))  # 1
    append(topic, "t", 0, txn_batch(1, [b"c"], sequence=1))  # 2
    assert topic.open_transactions("t", 0) == {1: 0, 2: 1}
    topic.append_control("t", 0, 1, 0, commit=True)  # 3
    assert topic.last_stable_offset("t", 0) == 1  # producer 2's transaction still holds it
    append(topic, "t", 0, txn_batch(3, [b"d"]))  # 4
    topic.append_control("t", 0, 2, 0, commit=False)  # 5
    assert topic.last_stable_offset("t", 0) == 4
    topic.append_control("t", 0, 3, 0, commit=False)  # 6
    assert topic.last_stable_offset("t", 0) == 7
    assert topic.aborted_transactions("t", 0, 0, 7) == [(2, 1), (3, 4)]


def test_aborted_transactions_answers_the_ranges_a_fetch_overlaps(topic):
    # producer 1: 0..3 (marker 3); producer 2 opens inside it at 1 and aborts later, at 5
    append(topic, "t", 0, txn_batch(1, [b"a"]))  # 0
    append(topic, "t", 0, txn_batch(2, [b"b"]))  # 1
    append(topic, "t", 0, txn_batch(1, [b"c"], sequence=1))  # 2
    topic.append_control("t", 0, 1, 0, commit=False)  # 3
    append(topic, "t", 0, build_batch([b"d"]))  # 4
    topic.append_control("t", 0, 2, 0, commit=False)  # 5
    append(topic, "t", 0, txn_batch(3, [b"e"]))  # 6
    topic.append_control("t", 0, 3, 0, commit=False)  # 7
    ranges = topic.aborted_transactions
    assert ranges("t", 0, 0, 8) == [(1, 0), (2, 1), (3, 6)]  # by first offset, not marker order
    assert ranges("t", 0, 3, 4) == [(1, 0), (2, 1)]  # a marker at the start still counts
    assert ranges("t", 0, 4, 6) == [(2, 1)]
    assert ranges("t", 0, 4, 7) == [(2, 1), (3, 6)]
    assert ranges("t", 0, 6, 7) == [(3, 6)]
    assert ranges("t", 0, 0, 1) == [(1, 0)]  # first offsets before the end only
    assert ranges("t", 0, 8, 20) == []


def test_read_committed_stops_at_the_last_stable_offset(topic):
    append(topic, "t", 0, build_batch([b"a", b"b"]))  # 0-1
    append(topic, "t", 0, txn_batch(7, [b"c"]))  # 2
    append(topic, "t", 0, build_batch([b"d"]))  # 3
    result = topic.read("t", 0, 0, 1 << 20, committed=True)
    assert len(result.batches) == 1 and result.last_stable_offset == 2 and result.high_watermark == 4
    assert topic.read("t", 0, 2, 1 << 20, committed=True).batches == []  # at the LSO: nothing yet, no error
    assert len(topic.read("t", 0, 0, 1 << 20).batches) == 3  # read_uncommitted reads to the high watermark
    topic.append_control("t", 0, 7, 0, commit=True)
    assert len(topic.read("t", 0, 0, 1 << 20, committed=True).batches) == 4


def test_a_replicated_high_watermark_holds_a_completed_transaction_until_it_passes_the_marker(topic):
    append(topic, "t", 0, build_batch([b"a"]))  # 0
    topic.set_high_watermark("t", 0, 1)
    append(topic, "t", 0, txn_batch(7, [b"b"]))  # 1
    topic.append_control("t", 0, 7, 0, commit=True)  # 2
    topic.set_high_watermark("t", 0, 2)  # the followers have the data, not the marker yet
    assert topic.last_stable_offset("t", 0) == 1
    topic.set_high_watermark("t", 0, 3)
    assert topic.last_stable_offset("t", 0) == 3


@pytest.mark.parametrize("how", ["clean", "crash", "rebuild", "v4-checkpoint"])
def test_transactions_survive_a_restart(data_dir, how, caplog):
    caplog.set_level(logging.INFO, logger="store")
    s = Store.open(data_dir, tiny_config())
    checkpoint = _write_history(s, data_dir)
    expected = [state(s, "t", p) for p in range(2)]
    assert expected[0][0] == {1: 0, 6: 8} and expected[0][3] == [(2, 1), (3, 3)]
    s.close()
    if how == "crash":  # the files hold what followed the checkpoint: cut back, derived again
        crash_to(data_dir, checkpoint)
    elif how == "rebuild":
        (data_dir / "checkpoint").unlink()
    elif how == "v4-checkpoint":  # written before transactions: a rebuild derives them
        doc = json.loads(checkpoint)
        doc["version"] = 4
        del doc["transactions"]
        crash_to(data_dir, json.dumps(doc).encode())
    caplog.clear()
    s = Store.open(data_dir, tiny_config())
    assert [state(s, "t", p) for p in range(2)] == expected
    rebuilt = "rebuilt consume queues" in caplog.text
    assert rebuilt == (how in ("rebuild", "v4-checkpoint"))  # the others trust the derived files
    s.append_control("t", 0, 1, 0, commit=False)  # what was open before the restart closes after it
    assert s.aborted_transactions("t", 0, 0, 100)[0] == (1, 0)
    s.close()


def test_a_sigkilled_store_recovers_the_same_transactions(tmp_path):
    data_dir = tmp_path / "data"
    script = textwrap.dedent(f"""
        import json, os, signal
        from pathlib import Path
        from store import StorageFull, Store, transactions
        from tests.store.conftest import tiny_config
        from tests.store.txn_history import _write_history, state
        s = Store.open(Path({str(data_dir)!r}), tiny_config(flush_mode="sync"))
        _write_history(s, Path({str(data_dir)!r}))
        print(json.dumps([[sorted(o.items()), lso, hw, a] for o, lso, hw, a in (state(s, "t", p) for p in range(2))]),
              flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    expected = json.loads(proc.stdout)
    s = Store.open(data_dir, tiny_config())
    got = [[sorted(o.items()), lso, hw, a] for o, lso, hw, a in (state(s, "t", p) for p in range(2))]
    assert json.loads(json.dumps(got)) == expected
    s.close()


def test_a_follower_derives_the_same_transactions(tmp_path):
    from tests.store.replicas import ship

    leader = Store.open(tmp_path / "leader", tiny_config())
    follower = Store.open(tmp_path / "follower", tiny_config())
    _write_history(leader, tmp_path / "leader")
    ship(leader, follower, chunk=700)  # pieces of a few entries
    assert [state(follower, "t", p) for p in range(2)] == [state(leader, "t", p) for p in range(2)]
    assert follower.read("t", 0, 0, 1 << 20, committed=True).last_stable_offset == 0
    leader.append_control("t", 0, 1, 0, commit=False)
    ship(leader, follower)
    assert [state(follower, "t", p) for p in range(2)] == [state(leader, "t", p) for p in range(2)]
    expected = state(leader, "t", 0)
    leader.close()
    follower.close()
    follower = Store.open(tmp_path / "follower", tiny_config())
    assert state(follower, "t", 0) == expected
    follower.close()


def test_a_truncated_log_reopens_the_transaction_whose_marker_it_lost(store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, txn_batch(1, [b"a"]))  # 0
    append(store, "t", 0, txn_batch(2, [b"b"]))  # 1
    store.append_control("t", 0, 2, 0, commit=False)  # 2
    cut_at = store.log_end_position
    store.append_control("t", 0, 1, 0, commit=False)  # 3: cut off below
    assert store.open_transactions("t", 0) == {}
    store.truncate_log(cut_at)
    assert store.high_watermark("t", 0) == 3
    assert store.open_transactions("t", 0) == {1: 0}
    assert store.last_stable_offset("t", 0) == 0
    assert store.aborted_transactions("t", 0, 0, 10) == [(2, 1)]


def test_retention_drops_the_aborted_entries_below_the_log_start(data_dir):
    config = tiny_config(retention_bytes=3 * 8192)
    s = Store.open(data_dir, config)
    s.create_topic("t", 1, {})
    append(s, "t", 0, txn_batch(1, [b"a" * 500]))  # 0: open across retention
    for i in range(40):  # aborted transactions over several segments
        append(s, "t", 0, txn_batch(10 + i, [bytes([i]) * 900]))
        s.append_control("t", 0, 10 + i, 0, commit=False)
    assert len(s.aborted_transactions("t", 0, 0, 100)) == 40
    assert s.enforce_retention() > 0
    start = s.log_start_offset("t", 0)
    assert start > 2
    kept = s.aborted_transactions("t", 0, 0, 100)
    assert 0 < len(kept) < 40 and all(first >= start - 1 for _, first in kept)  # markers below the log start went
    on_disk = Transactions.load(s._parts["t"][0].queue.directory).aborted  # the file was rewritten without them
    assert [(int(e["producer_id"]), int(e["first"])) for e in on_disk] == kept
    assert s.open_transactions("t", 0) == {1: 0}
    assert s.last_stable_offset("t", 0) == start  # an open transaction below the log start: held there
    assert s.read("t", 0, start, 1 << 20, committed=True).batches == []
    expected = state(s)
    s.close()
    s = Store.open(data_dir, config)
    assert state(s) == expected
    checkpoint = saved_checkpoint(s, data_dir)
    s.append_control("t", 0, 1, 0, commit=True)
    s.close()
    crash_to(data_dir, checkpoint)
    s = Store.open(data_dir, config)
    assert state(s)[:2] == ({}, s.high_watermark("t", 0))
    s.close()


def test_a_deleted_topic_takes_its_aborted_index_along(store):
    store.create_topic("t", 1, {})
    append(store, "t", 0, txn_batch(1, [b"a"]))
    store.append_control("t", 0, 1, 0, commit=False)
    directory = store._parts["t"][0].queue.directory
    assert (directory / ABORTED_INDEX).exists()
    store.delete_topic("t")
    assert not directory.exists()
    store.create_topic("t", 1, {})
    assert state(store) == ({}, 0, 0, [])


def test_a_compacted_topic_with_transactions_cleans_without_error(data_dir):
    s = Store.open(data_dir, tiny_config(cleaner_enable=False, segment_bytes=1 << 16, queue_entries_per_file=64))
    s.create_topic("c", 1, COMPACT)
    marker_key = b"\x00\x00\x00\x01"  # the bytes of a COMMIT marker's key, as a data record's key
    append(s, "c", 0, build_batch([b"data", b"k1-old"], keys=[marker_key, b"k1"]))  # 0-1
    append(s, "c", 0, txn_batch(7, [b"k1-aborted"], keys=[b"k1"]))  # 2
    s.append_control("c", 0, 7, 0, commit=False)  # 3
    append(s, "c", 0, txn_batch(8, [b"k2-committed"], keys=[b"k2"]))  # 4
    s.append_control("c", 0, 8, 0, commit=True)  # 5
    append(s, "c", 0, build_batch([b"k2-new"], keys=[b"k2"]))  # 6
    append(s, "c", 0, txn_batch(9, [b"k2-open"], keys=[b"k2"]))  # 7: open, never cleaned
    append(s, "c", 0, build_batch([b"last"], keys=[b"z"]))  # 8
    s.clean(force=True)
    got = [(o, k, v) for o, k, v in _records(s, "c")]
    assert (0, marker_key, b"data") in got  # no marker's record superseded it
    assert (1, b"k1", b"k1-old") in got  # the aborted k1 supersedes nothing
    assert (2, b"k1", b"k1-aborted") in got  # and is not removed for being aborted
    assert (4, b"k2", b"k2-committed") not in got  # superseded by 6
    assert {3, 5} <= {o for o, _, _ in got}  # markers stay
    assert (7, b"k2", b"k2-open") in got
    assert state(s, "c") == ({9: 7}, 7, 9, [(7, 2)])
    expected = state(s, "c")
    s.close()
    (data_dir / "checkpoint").unlink()  # a rebuild derives a cleaned partition's transactions in offset order
    s = Store.open(data_dir, tiny_config(cleaner_enable=False, segment_bytes=1 << 16, queue_entries_per_file=64))
    assert state(s, "c") == expected
    s.close()


def test_a_damaged_aborted_index_makes_the_open_rebuild(data_dir, caplog):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    append(s, "t", 0, txn_batch(1, [b"a"]))
    s.append_control("t", 0, 1, 0, commit=False)
    expected = state(s)
    index = s._parts["t"][0].queue.directory / ABORTED_INDEX
    s.close()
    index.write_bytes(bytes(index.stat().st_size))  # lost its entries: the checkpoint says otherwise
    s = Store.open(data_dir, tiny_config())
    assert "aborted-transactions index of t-0 ends at None, the checkpoint says 1" in caplog.text
    assert state(s) == expected
    s.close()


@pytest.mark.parametrize("open_at_end", [True, False])
def test_carried_transactional_batches_derive_the_same_after_a_rebuild(data_dir, open_at_end):
    config = tiny_config(cleaner_enable=False, segment_bytes=1 << 15, queue_entries_per_file=64)
    s = Store.open(data_dir, config)
    s.create_topic("c", 1, COMPACT)
    append(s, "c", 0, txn_batch(7, [b"aborted"], keys=[b"t1"]))  # 0
    s.append_control("c", 0, 7, 0, commit=False)  # 1
    append(s, "c", 0, txn_batch(8, [b"committed"], keys=[b"t2"]))  # 2
    s.append_control("c", 0, 8, 0, commit=True)  # 3
    for i in range(300):
        append(s, "c", 0, build_batch([b"%06d" % (i * 10 + j) + b"." * 200 for j in range(10)],
                                      keys=[b"k%02d" % ((i * 10 + j) % 50) for j in range(10)]))
    if open_at_end:
        append(s, "c", 0, txn_batch(9, [b"open"], keys=[b"t3"]))
    s.clean(force=True)
    first_position = s._parts["c"][0].queue.entry(0)[0]
    assert s.enforce_retention() > 0  # the batches at offsets 0-3 are carried to the commitlog head
    assert s._parts["c"][0].queue.entry(0)[0] >= s._log.min_position > first_position
    expected = state(s, "c")
    assert expected[0] == ({9: 3004} if open_at_end else {}) and expected[3] == [(7, 0)]
    s.close()
    s = Store.open(data_dir, config)
    assert state(s, "c") == expected
    s.close()
    (data_dir / "checkpoint").unlink()  # only the carried copies of 0-3 remain, out of offset order
    s = Store.open(data_dir, config)
    assert state(s, "c") == expected
    s.close()
