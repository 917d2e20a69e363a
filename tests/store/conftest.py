"""Shared fixtures for store tests: tiny configs and a RecordBatch builder."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.record_batch import parse_header
from store import Store, StoreConfig
from store.segment import AllocationFaults


def build_batch(values: list[bytes], *, timestamps: list[int] | None = None,
                keys: list[bytes | None] | None = None,
                headers: list[list[tuple[str, bytes]]] | None = None) -> bytes:
    """A RecordBatch v2 with one record per value, baseOffset 0, as a producer sends it."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamps[i] if timestamps else 1_000 + i,
                       key=keys[i] if keys else None, value=value,
                       headers=headers[i] if headers else [])
    return bytes(builder.build())


def append(store: Store, topic: str, partition: int, batch: bytes):
    return store.append(topic, partition, batch, parse_header(batch))


@contextmanager
def disk_full(store: Store) -> Iterator[None]:
    """Inside, creating a commitlog segment fails with ENOSPC, and none is made ahead: the
    append that needs the next segment is the first to meet the full disk."""
    AllocationFaults.enospc = True
    try:
        store._log.stop_allocator()
        store._log._ahead = None
        yield
    finally:
        AllocationFaults.enospc = False


def segment_names(data_dir: Path) -> list[str]:
    """Names of the complete commitlog segments, oldest first.

    The background allocator may be creating the next segment as `<start>.alloc` at any
    moment (it is renamed once allocated), so a listing taken while the store is open
    must leave those out."""
    return sorted(p.name for p in (data_dir / "commitlog").iterdir()
                  if len(p.name) == 20 and p.name.isdigit())


def saved_checkpoint(store: Store, data_dir: Path) -> bytes:
    """A durable checkpoint as of now, to put back with crash_to."""
    store.write_checkpoint()
    return (data_dir / "checkpoint").read_bytes()


def crash_to(data_dir: Path, checkpoint: bytes) -> None:
    """After close(): make the data dir look as if the process had died some time after
    `checkpoint` was saved (derived files hold more than it says, as after a real crash)."""
    (data_dir / "checkpoint").write_bytes(checkpoint)
    (data_dir / "clean_shutdown").unlink()


def kill_at_random(module: str, data_dir: Path, rng, low: float, high: float) -> list[str]:
    """Run `python -m MODULE DATA_DIR` (a writer that prints each append once it is durable),
    SIGKILL it a random `low`..`high` seconds after its first line (start-up time varies with
    machine load, so a fixed delay could kill it before its first append), and return the
    lines it printed; a line cut by the kill may be among them."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen([sys.executable, "-m", module, str(data_dir)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, f"{module} printed nothing within 120 s"
        first = proc.stdout.readline()
        time.sleep(rng.uniform(low, high))
    finally:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    return (first + out).decode().splitlines()


def tiny_config(**overrides) -> StoreConfig:
    values = {"segment_bytes": 8192, "queue_entries_per_file": 16, "flush_interval_ms": 20,
                  "retention_ms": -1, "retention_check_interval_ms": 3_600_000,
                  "key_index_slots": 8, "key_index_entries": 64}
    values.update(overrides)
    return StoreConfig(**values)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    s = Store.open(data_dir, tiny_config())
    yield s
    s.close()


@pytest.fixture(params=["async", "sync"])
def store_any_mode(request, data_dir: Path) -> Iterator[Store]:
    """A store in each flush mode: async stores entries through the mapping, sync writes them
    with pwrite(); the files and the reads must not tell the two apart."""
    s = Store.open(data_dir, tiny_config(flush_mode=request.param))
    yield s
    s.close()
