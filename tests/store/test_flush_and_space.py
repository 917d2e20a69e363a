"""Sync-mode group commit handles, async flushing, and running out of disk space."""

from __future__ import annotations

import threading

import pytest

from store import StorageFull, Store, StoreError
from store.errors import LogDirOffline
from store.flush import FlushHandle
from store.segment import WriteBuffer
from tests.store.conftest import append, build_batch, disk_full, tiny_config


def test_async_mode_returns_no_flush_handle(store):
    store.create_topic("t", 1, {})
    assert append(store, "t", 0, build_batch([b"x"])).flush is None


def test_sync_mode_handles_complete_once_durable(data_dir):
    s = Store.open(data_dir, tiny_config(flush_mode="sync"))
    s.create_topic("t", 1, {})
    handle = append(s, "t", 0, build_batch([b"x"])).flush
    assert handle.wait(5)
    assert handle.done()
    called = []
    handle.add_done_callback(called.append)
    assert called == [handle]
    s.close()


def test_one_completion_releases_every_waiter_of_a_handle():
    handle = FlushHandle()
    assert not handle.wait(0.01) and not handle.done()
    released = []
    threads = [threading.Thread(target=lambda: released.append(handle.wait(10))) for _ in range(8)]
    for t in threads:
        t.start()
    handle._complete()
    for t in threads:
        t.join(10)
    assert released == [True] * 8
    assert handle.done() and handle.wait(0)


def test_a_failed_fsync_reaches_every_waiter():
    handle = FlushHandle()
    errors = []

    def waiter() -> None:
        try:
            handle.wait(10)
        except StoreError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for t in threads:
        t.start()
    handle._complete(OSError(5, "EIO"))
    for t in threads:
        t.join(10)
    assert len(errors) == 4 and "EIO" in str(errors[0])
    with pytest.raises(StoreError):
        handle.wait(0)


def test_after_a_failed_fsync_the_store_refuses_appends_and_never_retries_the_fsync(data_dir, monkeypatch):
    """A retried fsync may "succeed" after the kernel dropped the failed pages: the first error
    is final for every group, later appends are refused (LogDirOffline), reads go on."""
    s = Store.open(data_dir, tiny_config(flush_mode="sync"))
    s.create_topic("t", 1, {})
    assert append(s, "t", 0, build_batch([b"ok"])).flush.wait(5)
    calls = []

    def failing(start: int, end: int) -> None:
        calls.append((start, end))
        raise OSError(5, "EIO")

    monkeypatch.setattr(s._flusher, "_flush_range", failing)
    with pytest.raises(StoreError, match="EIO"):
        append(s, "t", 0, build_batch([b"lost"])).flush.wait(5)
    assert len(calls) == 1 and isinstance(s.offline, LogDirOffline)
    monkeypatch.setattr(s._flusher, "_flush_range", lambda start, end: calls.append((start, end)))
    with pytest.raises(LogDirOffline):
        append(s, "t", 0, build_batch([b"refused"]))
    s.flush()
    assert len(calls) == 1  # never fsynced again: the failed range is not trusted
    assert s.read("t", 0, 0, 1 << 20).batches  # reads go on
    s.close()
    assert not (data_dir / "clean_shutdown").exists()  # the next start recovers from the commitlog


def test_write_buffer_reports_a_failed_write(tmp_path):
    buffer = WriteBuffer(16)
    buffer.view[:5] = b"hello"
    with open(tmp_path / "f", "wb+") as f:
        buffer.pwrite(f.fileno(), 5, 3)
        assert (tmp_path / "f").read_bytes() == b"\0\0\0hello"
    with open(tmp_path / "f", "rb") as f, pytest.raises(OSError) as info:  # read-only: EBADF
        buffer.pwrite(f.fileno(), 5, 0)
    assert info.value.errno == 9


def test_sync_mode_group_commit_shares_fsyncs(data_dir, monkeypatch):
    s = Store.open(data_dir, tiny_config(flush_mode="sync", segment_bytes=1 << 20))
    s.create_topic("t", 16, {})
    fsyncs = []
    real = s._log.flush
    monkeypatch.setattr(s._flusher, "_flush_range", lambda a, b: (fsyncs.append(b), real(a, b)))
    done = []

    def appender(p: int) -> None:
        for _ in range(50):
            h = append(s, "t", p, build_batch([b"v" * 100])).flush
            h.add_done_callback(lambda _h: done.append(1))
            assert h.wait(10)

    threads = [threading.Thread(target=appender, args=(p,)) for p in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == 800
    assert len(fsyncs) < 800
    s.close()


def test_storage_full_at_allocation_then_resumes(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    batch = build_batch([b"z" * 1000])
    with disk_full(s):
        appended = 0
        with pytest.raises(StorageFull):
            for _ in range(100):
                append(s, "t", 0, batch)
                appended += 1
        assert 0 < appended < 100
        hw = s.high_watermark("t", 0)
        assert hw == appended
        with pytest.raises(StorageFull):
            append(s, "t", 0, batch)
        assert s.high_watermark("t", 0) == hw
    r = append(s, "t", 0, batch)
    assert r.base_offset == hw
    assert len(s.read("t", 0, 0, 1 << 30).batches) == hw + 1
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert s.high_watermark("t", 0) == hw + 1
    s.close()


def test_close_is_idempotent(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.close()
    s.close()
    assert (data_dir / "clean_shutdown").exists()
    Store.open(data_dir, tiny_config()).close()


def test_a_checkpoint_syncs_the_file_system_once_when_many_queues_moved_and_msyncs_a_few(data_dir, monkeypatch):
    """Each moved queue's mapping is msynced when few moved; from SYNCFS_FROM_QUEUES on, one
    syncfs of the data directory's file system makes them all durable (10,000 partitions: one
    writeback per checkpoint, not one per queue). Either way the queues are on disk first."""
    import store.housekeeping as store_module
    from store.consume_queue import ConsumeQueue
    s = Store.open(data_dir, tiny_config())
    try:
        s.create_topic("many", store_module.SYNCFS_FROM_QUEUES, {})
        s.write_checkpoint()
        synced, flushed = [], []
        real_flush = ConsumeQueue.flush
        monkeypatch.setattr(store_module, "sync_filesystem", lambda path: synced.append(path))
        monkeypatch.setattr(ConsumeQueue, "flush", lambda q: (flushed.append(q), real_flush(q)))
        for p in range(3):
            append(s, "many", p, build_batch([b"x"]))
        s.write_checkpoint()
        assert synced == [] and len(flushed) == 3
        flushed.clear()
        for p in range(store_module.SYNCFS_FROM_QUEUES):
            append(s, "many", p, build_batch([b"y"]))
        s.write_checkpoint()
        assert synced == [data_dir] and flushed == []
    finally:
        monkeypatch.undo()
        s.close()


def test_sync_filesystem_syncs_a_directorys_file_system_and_raises_for_a_missing_one(tmp_path):
    from store.segment import sync_filesystem
    sync_filesystem(tmp_path)
    with pytest.raises(OSError):
        sync_filesystem(tmp_path / "missing")
