"""A batch whose bytes wait in a pipe (store/piped.py) is appended by splicing them into the
commitlog: the same entry as the bytes' own append, its CRC checked from the page cache, and a
batch that fails the check leaves zeros, not bytes, past the log's end."""

from __future__ import annotations

import fcntl
import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.record_batch import HEADER_SIZE as HEAD_BYTES
from protocol.record_batch import parse_header
from store import AppendResult, BatchCrcMismatch, PipedBatch, Store, records
from tests.store.conftest import append, build_batch, tiny_config


@pytest.fixture
def store(data_dir):
    """Segments of 1 MiB: batches large enough to be piped."""
    s = Store.open(data_dir, tiny_config(segment_bytes=1 << 20))
    yield s
    s.close()


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    yield read_fd, write_fd
    os.close(read_fd)
    os.close(write_fd)


def piped(pipe, batch: bytes) -> PipedBatch:
    read_fd, write_fd = pipe
    assert os.write(write_fd, batch) == len(batch)
    return PipedBatch(read_fd, len(batch), batch[:HEAD_BYTES])


def _items(pipe, topic: str, batch: bytes) -> list:
    return [(topic, 0, piped(pipe, batch), parse_header(batch))]


def _entry_bytes(store, result: AppendResult, batch: bytes) -> bytes:
    """The whole commitlog entry of an append: header, batch, topic name."""
    start = result.end_position - len(batch) - 60 - len(b"t")
    seg = store._log.segment_at(start)
    return bytes(seg.view[start - seg.start:result.end_position - seg.start])


def test_a_piped_batch_makes_the_same_entry_as_its_bytes(store, pipe):
    store.create_topic("t", 1, {})
    batch = build_batch([bytes([i]) * 3000 for i in range(40)], keys=[b"k%d" % i for i in range(40)])
    plain = append(store, "t", 0, batch)
    (spliced,) = store.append_many(_items(pipe, "t", batch))
    assert spliced.__class__ is AppendResult and spliced.base_offset == 40
    first, second = _entry_bytes(store, plain, batch), _entry_bytes(store, spliced, batch)
    # only the base offset (entry and batch) and the store timestamp may differ; the CRC covers them
    assert len(first) == len(second)
    differ = [i for i in range(len(first)) if first[i] != second[i]]
    assert all(i in range(4, 8) or i in range(32, 40) or i in range(44, 52) or i in range(60, 68) for i in differ)
    read = store.read("t", 0, 40, 1 << 20).batches
    assert bytes(read[0])[16:] == batch[16:]
    fcntl.fcntl(pipe[0], fcntl.F_SETFL, os.O_NONBLOCK)  # the pipe gave up all of the batch
    with pytest.raises(BlockingIOError):
        os.read(pipe[0], 1)
    # keys are indexed from the commitlog, as for any append
    assert [h.offset for h in store.lookup_key("t", b"k3", 0, 2**62)] == [43, 3]


def test_a_batch_whose_crc_fails_is_refused_and_leaves_nothing_behind(store, pipe):
    store.create_topic("t", 1, {})
    append(store, "t", 0, build_batch([b"first"]))
    position = store._log.write_position
    bad = bytearray(build_batch([b"x" * 5000]))
    bad[-1] ^= 0xFF  # a record's byte: the batch's CRC no longer holds
    (result,) = store.append_many(_items(pipe, "t", bytes(bad)))
    assert result.__class__ is BatchCrcMismatch
    assert store._log.write_position == position and store.high_watermark("t", 0) == 1
    seg = store._log.segment_at(position)
    local = position - seg.start
    assert bytes(seg.view[local:local + 60 + len(bad) + 1]) == bytes(60 + len(bad) + 1)
    # the next append takes the place, and the log reads as before
    good = build_batch([b"after"])
    (after,) = store.append_many(_items(pipe, "t", good))
    assert after.__class__ is AppendResult and after.base_offset == 1
    assert [r.value for r in records.decode(bytes(store.read("t", 0, 1, 1 << 20).batches[0]))] == [b"after"]


def test_topics_that_read_the_records_take_them_out_of_the_pipe(store, pipe):
    store.create_topic("t", 1, {"tag.header": "tag"})
    batch = build_batch([b"a", b"b"], headers=[[("tag", b"paid")], []])
    (result,) = store.append_many(_items(pipe, "t", batch))
    assert result.__class__ is AppendResult
    assert list(store.tag_hashes("t", 0, 0, 2)) == [records.tag_hash(b"paid"), 0]


def test_a_transactional_batch_is_read_out_of_the_pipe_and_opens_its_transaction(store, pipe):
    store.create_topic("t", 1, {})
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=7,
                                        producer_epoch=0, base_sequence=0, batch_size=2**30)
    builder.append(0, timestamp=1, key=None, value=b"v" * 100, headers=[])
    batch = bytes(builder.build())
    (result,) = store.append_many(_items(pipe, "t", batch))
    assert result.__class__ is AppendResult
    assert store.last_stable_offset("t", 0) == 0  # an open transaction holds the stable offset back
