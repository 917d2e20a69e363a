"""Helpers for the MetaQ-extension tests: tagged batches and an in-process store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.record_batch import parse_header
from store import Store, StoreConfig

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
