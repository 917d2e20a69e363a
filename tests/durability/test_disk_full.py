"""Disk full on a real small file system: a tmpfs of a few MiB mounted by the test (root
only; skipped otherwise — tests/store/test_flush_and_space.py simulates ENOSPC at segment
allocation where mounting is impossible). Producers get KAFKA_STORAGE_ERROR quickly, data
already written stays readable, and once space is freed producing resumes without a
restart and without corruption."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.wire import create_by_metadata as create
from tests.kit.wire import produce_batch as produce
from tests.kit.wire import WireClient
from tests.kit.gregor import BrokerProcess
from tests.durability.records import _batch, _read_values
from tests.durability.full_disk import _ballast, mount_tmpfs

KAFKA_STORAGE_ERROR = 56
MIB = 1 << 20
SETTINGS = {"commitlog.segment.bytes": str(MIB), "message.max.bytes": str(64 * 1024),
            "consumequeue.entries.per.file": "1000", "log.retention.ms": "-1"}


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "fs"
    mount_tmpfs(mount_point, "8m")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def _produce_until_full(client: WireClient, topic: str, limit: int = 400) -> tuple[list[bytes], float]:
    """Produce 32 KiB batches until the broker refuses one; returns the acknowledged values
    and the slowest answer in seconds."""
    acked: list[bytes] = []
    slowest = 0.0
    for i in range(limit):
        value = b"%06d" % i + b"x" * (32 * 1024)
        began = time.monotonic()
        resp = produce(client, topic, _batch([value]))
        slowest = max(slowest, time.monotonic() - began)
        if resp.error_code == KAFKA_STORAGE_ERROR:
            return acked, slowest
        assert resp.error_code == 0, resp
        assert resp.base_offset == len(acked)
        acked.append(value)
    pytest.fail("the file system never filled")


def _run(fs: Path, settings: dict[str, str]) -> BrokerProcess:
    broker = BrokerProcess(fs / "data", settings)
    broker.start()
    return broker


def test_full_disk_refuses_produce_quickly_and_resumes_once_space_is_freed(small_fs, topic_name):
    broker = _run(small_fs, SETTINGS)
    try:
        client = WireClient(broker.bootstrap)
        create(client, topic_name)
        ballast = _ballast(small_fs, leave=3 * MIB + MIB // 2)
        acked, slowest = _produce_until_full(client, topic_name)
        assert acked and slowest < 5.0
        for _ in range(3):  # a batch that needs a new segment stays refused, quickly, while full
            began = time.monotonic()
            assert produce(client, topic_name, _batch([b"r" * 32 * 1024])).error_code == KAFKA_STORAGE_ERROR
            assert time.monotonic() - began < 5.0
        assert _read_values(client, topic_name, 0, 0, len(acked)) == acked
        ballast.unlink()  # the operator frees space: no restart
        resp = produce(client, topic_name, _batch([b"after"]))
        assert resp.error_code == 0 and resp.base_offset == len(acked)
        assert _read_values(client, topic_name, 0, 0, len(acked) + 1) == acked + [b"after"]
        client.close()
        assert broker.stop() == 0
        broker.start()
        client = WireClient(broker.bootstrap)
        assert _read_values(client, topic_name, 0, 0, len(acked) + 1) == acked + [b"after"]
        assert "corrupt" not in broker.log()
        client.close()
    finally:
        broker.stop()


def test_retention_deleting_a_segment_lets_producing_resume(small_fs, topic_name):
    settings = dict(SETTINGS, **{"log.retention.bytes": str(2 * MIB),
                                 "log.retention.check.interval.ms": "3000"})
    broker = _run(small_fs, settings)
    try:
        client = WireClient(broker.bootstrap)
        create(client, topic_name)
        _ballast(small_fs, leave=3 * MIB + MIB // 2)
        acked, slowest = _produce_until_full(client, topic_name)
        assert acked and slowest < 5.0
        deadline = time.monotonic() + 20
        while True:  # retention runs every 3 s and deletes the oldest segment
            resp = produce(client, topic_name, _batch([b"after" * 8000]))
            if resp.error_code == 0:
                break
            assert resp.error_code == KAFKA_STORAGE_ERROR and time.monotonic() < deadline
            time.sleep(0.2)
        assert resp.base_offset == len(acked)
        start = resp.log_start_offset
        assert start > 0
        assert _read_values(client, topic_name, 0, start, len(acked) + 1) == acked[start:] + [b"after" * 8000]
        assert "corrupt" not in broker.log()
        client.close()
    finally:
        broker.stop()


def test_consume_queue_growth_on_a_full_disk_is_refused_not_a_crash(small_fs, topic_name):
    """Many small records grow the (sparse, mmap'd) consume queue faster than the commitlog:
    its pages are reserved with posix_fallocate before an append writes anything, so a full
    disk is KAFKA_STORAGE_ERROR instead of SIGBUS killing the broker."""
    broker = _run(small_fs, dict(SETTINGS, **{"consumequeue.entries.per.file": "100000"}))
    try:
        client = WireClient(broker.bootstrap)
        create(client, topic_name)
        ballast = _ballast(small_fs, leave=256 * 1024)
        acked = 0
        for _ in range(2000):
            resp = produce(client, topic_name, _batch([b"%d" % i for i in range(200)]))
            if resp.error_code == KAFKA_STORAGE_ERROR:
                break
            assert resp.error_code == 0 and resp.base_offset == acked
            acked += 200
        else:
            pytest.fail("the file system never filled")
        assert broker.proc.poll() is None
        assert _read_values(client, topic_name, 0, acked - 200, acked) == [b"%d" % i for i in range(200)]
        ballast.unlink()
        assert produce(client, topic_name, _batch([b"again"])).base_offset == acked
        client.close()
    finally:
        broker.stop()
