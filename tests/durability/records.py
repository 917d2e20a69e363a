"""Record batches written and read back on the wire by the durability tests."""

from __future__ import annotations

import time

from kafka.protocol.consumer import FetchRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tests.kit.wire import WireClient


def _batch(values: list[bytes]) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    return bytes(b.build())


def _fetch(client: WireClient, topic: str, partition: int, offset: int):
    F = FetchRequest.FetchTopic
    req = FetchRequest[12](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[F(topic=topic, partitions=[F.FetchPartition(
                               partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    return client.request(req).responses[0].partitions[0]


def _read_values(client: WireClient, topic: str, partition: int, start: int, stop: int) -> list[bytes]:
    out, offset = [], start
    while offset < stop:
        part = _fetch(client, topic, partition, offset)
        assert part.error_code == 0, (offset, part.error_code)
        data = memoryview(part.records)
        while len(data) >= 61:
            size = int.from_bytes(data[8:12], "big") + 12
            for r in DefaultRecordBatch(bytes(data[:size])):
                if offset <= r.offset < stop:
                    out.append(r.value)
                    offset = r.offset + 1
            data = data[size:]
    return out
