"""Store configuration: the knobs of the storage engine and their Kafka-style names.

Owns defaults and validation of storage settings. Never reads files or the environment;
the broker maps its config file onto this dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.errors import StoreError


@dataclass
class StoreConfig:
    segment_bytes: int = 1 << 30  # commitlog.segment.bytes
    queue_entries_per_file: int = 300_000  # consume queue entries per file
    flush_mode: str = "async"  # flush.mode: "async" | "sync"
    flush_interval_ms: int = 500  # flush.interval.ms (async flusher period)
    retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.ms (-1 = forever)
    retention_bytes: int = -1  # log.retention.bytes (-1 = unlimited), total commitlog bytes
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    key_index_max_hits: int = 32
    node_id: int = 0
    key_index_slots: int = 500_000  # hash slots per key-index file
    key_index_entries: int = 2_000_000  # entries per key-index file
    checkpoint_interval_ms: int = 10_000  # checkpoint.interval.ms: how much a crash recovery re-derives
    verify_on_start: bool = True  # commitlog.verify.on.start: CRC-check every entry after a clean shutdown
    # the log cleaner (store/compaction.py), with Kafka's broker-wide names and defaults
    cleaner_enable: bool = True  # log.cleaner.enable
    cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms: between the cleaner's runs
    cleaner_min_cleanable_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio
    cleaner_delete_retention_ms: int = 86_400_000  # log.cleaner.delete.retention.ms
    cleaner_min_compaction_lag_ms: int = 0  # log.cleaner.min.compaction.lag.ms
    cleaner_max_compaction_lag_ms: int = 2**63 - 1  # log.cleaner.max.compaction.lag.ms

    def validate(self) -> None:
        if self.flush_mode not in ("async", "sync"):
            raise StoreError(f"flush.mode must be 'async' or 'sync', not {self.flush_mode!r}")
        if self.segment_bytes < 4096:
            raise StoreError("commitlog.segment.bytes must be at least 4096")
        if self.queue_entries_per_file < 1:
            raise StoreError("queue entries per file must be positive")
        if self.flush_interval_ms <= 0 or self.retention_check_interval_ms <= 0 or self.checkpoint_interval_ms <= 0 \
                or self.cleaner_backoff_ms <= 0:
            raise StoreError("flush, retention, checkpoint and log cleaner intervals must be positive")
        if not 0 <= self.cleaner_min_cleanable_ratio <= 1:
            raise StoreError("log.cleaner.min.cleanable.ratio must be between 0 and 1")
        if self.key_index_slots < 1 or self.key_index_entries < 1:
            raise StoreError("key index sizes must be positive")
        if not 0 <= self.node_id < 2**31:
            raise StoreError("node id must fit in a non-negative int32")
