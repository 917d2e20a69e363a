"""What appends and reads return (Kafka's LogAppendInfo and FetchDataInfo; RocketMQ's PutMessageResult)."""

from __future__ import annotations

from typing import NamedTuple

from store.flush import FlushHandle


class AppendResult(NamedTuple):  # a tuple: cheaper to build than a frozen dataclass
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    end_position: int
    flush: FlushHandle | None
    log_start_offset: int  # the partition's, as the batch was appended (Produce answers carry it)


class ReadResult(NamedTuple):  # a tuple, as AppendResult: one per partition of every fetch
    batches: list[memoryview]
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
