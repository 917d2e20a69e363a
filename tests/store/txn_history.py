"""A history of transactions written to a store, and each partition's transactional state read back, for the store's transaction tests (also run in a child process that is SIGKILLed)."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from store import Store
from tests.store.conftest import append, build_batch, saved_checkpoint


def txn_batch(producer_id: int, values: list[bytes], keys: list[bytes | None] | None = None,
              sequence: int = 0) -> bytes:
    """A transactional RecordBatch v2 as a transactional producer sends it."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                        producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                                        batch_size=2**30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_000 + i, key=keys[i] if keys else None, value=value, headers=[])
    return bytes(builder.build())


def state(s: Store, topic: str = "t", partition: int = 0) -> tuple:
    """Everything the store derives about a partition's transactions."""
    hw = s.high_watermark(topic, partition)
    return (s.open_transactions(topic, partition), s.last_stable_offset(topic, partition), hw,
            s.aborted_transactions(topic, partition, 0, hw + 1))


def _write_history(s: Store, data_dir: Path) -> bytes:
    """Transactions begun, committed and aborted both before and after a checkpoint; returns
    the checkpoint."""
    s.create_topic("t", 2, {})
    append(s, "t", 0, txn_batch(1, [b"a"]))  # opened before the checkpoint, still open at its end
    append(s, "t", 0, txn_batch(2, [b"b"]))
    s.append_control("t", 0, 2, 0, commit=False)
    append(s, "t", 1, txn_batch(5, [b"x"]))
    s.append_control("t", 1, 5, 0, commit=True)
    checkpoint = saved_checkpoint(s, data_dir)
    append(s, "t", 0, txn_batch(3, [b"c"]))  # after the checkpoint: re-derived from the commitlog
    append(s, "t", 0, build_batch([b"d"]))
    s.append_control("t", 0, 3, 0, commit=False)
    append(s, "t", 0, txn_batch(4, [b"e"]))
    s.append_control("t", 0, 4, 0, commit=True)
    append(s, "t", 0, txn_batch(6, [b"f"]))
    append(s, "t", 1, txn_batch(5, [b"y"], sequence=1))
    return checkpoint
