"""Helpers for the MetaQ-extension tests: tagged batches, an in-process store, and a live broker
with the admin HTTP API."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.record_batch import parse_header
from store import Store, StoreConfig
from tests.kit.gregor import TEST_SEGMENT_BYTES

TAG = "tag"


def tagged_batch(tags: list[str | None], *, first_value: int = 0, compression: int = 0,
                 timestamp: int = 1_000, producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    """One RecordBatch v2 with a record per tag (None: no tag header); values are b"v<n>"."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=producer[2], batch_size=2**30)
    for i, tag in enumerate(tags):
        headers = [("other", b"x"), (TAG, tag.encode())] if tag is not None else []
        builder.append(i, timestamp=timestamp + i, key=b"k%d" % (first_value + i),
                       value=b"v%d" % (first_value + i), headers=headers)
    return bytes(builder.build())


def append(store: Store, topic: str, partition: int, batch: bytes):
    return store.append(topic, partition, batch, parse_header(batch))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "data", StoreConfig(segment_bytes=1 << 20, queue_entries_per_file=1000,
                                                  retention_ms=-1))
    yield s
    s.close()


ROOT = Path(__file__).resolve().parents[2]
_READY = re.compile(r"listening on ([\d.]+:\d+)")
_ADMIN = re.compile(r"admin API on http://([\d.]+:\d+)")


@dataclass
class AdminBroker:
    bootstrap: str
    admin: str


def gregor_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the `gregor` command line as a user would."""
    return subprocess.run([sys.executable, "-m", "broker", *args], check=False, cwd=ROOT, capture_output=True,
                          text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def admin_broker(tmp_path_factory) -> Iterator[AdminBroker]:
    """A live broker with the admin HTTP API on, shared by the extension tests."""
    tmp = tmp_path_factory.mktemp("gregor-ext")
    log_path = tmp / "broker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp / "data"),
                                 "--port", "0", "--admin-port", "0", "--set", "group.initial.rebalance.delay.ms=0",
                                 "--set", f"commitlog.segment.bytes={TEST_SEGMENT_BYTES}",
                                 "--set", "log.cleaner.backoff.ms=300",
                                 "--log-level", "INFO"], cwd=ROOT, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            text = log_path.read_text(errors="replace")
            ready, admin = _READY.search(text), _ADMIN.search(text)
            if ready and admin:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker did not start:\n{text}")
            time.sleep(0.05)
        yield AdminBroker(ready.group(1), admin.group(1))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
