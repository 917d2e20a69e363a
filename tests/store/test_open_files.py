"""Partitions against the open-file limit: every queue file stays open while mapped."""

from __future__ import annotations

import gc
import os
import resource
import subprocess
import sys

import pytest

from store import QueueFilesUnavailable, Store, StoreConfig
from tests.kit.gregor import ROOT


def test_the_soft_limit_is_raised_to_the_hard_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip("the hard limit leaves nothing to raise")

    code = ("import resource; from store.limits import raise_open_file_limit; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, (64, {hard})); "
            "print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    expected = hard if hard != resource.RLIM_INFINITY else 1 << 20
    assert out == [str(expected), str(expected)]


@pytest.fixture
def few_open_files():
    """About 60 more descriptors than this process has open now, for the test's duration."""
    gc.collect()  # earlier tests' unreachable stores still hold mapped queue files open
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 60, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_topic_that_needs_more_open_files_than_allowed_is_refused_whole(tmp_path, few_open_files):
    store = Store.open(tmp_path, StoreConfig(segment_bytes=1 << 20, queue_entries_per_file=1024))
    try:
        with pytest.raises(QueueFilesUnavailable, match="too many open files.*ulimit -n"):
            store.create_topic("big", 200, {})
        assert "big" not in store.topics()
        assert not (tmp_path / "consumequeue" / "big").exists()
        store.create_topic("small", 4, {})  # the files of the refused topic were given back
        with pytest.raises(QueueFilesUnavailable, match="too many open files"):
            store.add_partitions("small", 200)
        assert store.topics()["small"].partitions == 4
        assert sorted(os.listdir(tmp_path / "consumequeue" / "small")) == ["0", "1", "2", "3"]
        assert store.append("small", 3, _batch(), _header()).base_offset == 0
    finally:
        store.close()


def _batch() -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**20)
    b.append(0, timestamp=1, key=None, value=b"v", headers=[])
    return bytes(b.build())


def _header():
    from protocol.record_batch import parse_header

    return parse_header(_batch())
