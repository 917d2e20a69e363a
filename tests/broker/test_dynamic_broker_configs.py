"""Gregor's dynamic broker settings in force (broker/broker_settings.py): log.retention.ms set at run
time deletes the expired commitlog segments at the next retention pass; the log cleaner follows
log.cleaner.min.compaction.lag.ms set and deleted at run time; a connection limit set at
run time refuses the next connection and lets it in once deleted; settings survive a restart, described
with the same sources and put in force again; what Gregor reads at start only is refused, and a
value its one commitlog cannot honour too. (The answers Kafka 4.4 gives too: tests/clients/
test_broker_configs.py.)"""

from __future__ import annotations

import time

from kafka.protocol.metadata import MetadataRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker.dynamic_configs import DEFAULT_NODE
from broker.security.dynamic_tls import state_key
from protocol.errors import ErrorCode
from tests.kit.broker_configs import BROKER, DELETE, SET, describe, incremental
from tests.kit.broker_configs import log_start as earliest
from tests.kit.inprocess import InProcessBroker
from tests.kit.wait import wait_until
from tests.kit.wire import WireClient, batch, create_topic, fetch, produce_batch

METADATA = MetadataRequest[9](topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def _answers(bootstrap: str) -> bool:
    """Does a new connection from here get an answer (not closed at accept)?"""
    client = WireClient(bootstrap, timeout=3)
    try:
        client.request(METADATA)
        return True
    except (OSError, ConnectionError, EOFError, AssertionError):
        return False
    finally:
        client.close()


def test_log_retention_ms_set_at_run_time_deletes_expired_segments(tmp_path):
    # in-process brokers have 8 MiB commitlog segments (tests/kit/gregor.py): ten 1 MB batches roll one
    b = InProcessBroker(tmp_path / "data", **{"log.retention.check.interval.ms": "200"}).start()
    try:
        admin = b.client()
        topic, error, _ = create_topic(admin)
        assert error == 0
        assert [produce_batch(admin, topic, batch(1, b"x" * 1_000_000)).error_code for _ in range(10)] == [0] * 10
        time.sleep(1)  # retention passes with the default 7 days: nothing expires
        assert earliest(admin, topic) == 0
        assert incremental(admin, "", [("log.retention.ms", SET, "1")]) == (0, None)
        moved = wait_until(lambda: earliest(admin, topic), 10, "the log start moving")
        assert 0 < moved < 10  # the rolled segment went, the active one stays
    finally:
        b.stop()


def _keyed(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=b"k", value=value, headers=[])
    return bytes(b.build())


def _offsets(client, topic: str) -> list[int]:
    records, found = MemoryRecords(bytes(fetch(client, topic, 0).records or b"")), []
    while (read := records.next_batch()) is not None:
        found.extend(r.offset for r in read)
    return found


def test_the_log_cleaner_follows_a_compaction_lag_set_and_deleted_at_run_time(tmp_path):
    b = InProcessBroker(tmp_path / "data", **{"log.cleaner.backoff.ms": "100"}).start()
    try:
        admin = b.client()
        assert incremental(admin, "", [("log.cleaner.min.compaction.lag.ms", SET, "3600000")]) == (0, None)
        topic, error, _ = create_topic(admin, {"cleanup.policy": "compact"})
        assert error == 0
        assert [produce_batch(admin, topic, _keyed(v)).error_code for v in (b"1", b"2", b"3")] == [0, 0, 0]
        time.sleep(1)  # ten cleaner runs: every record is younger than the lag
        assert _offsets(admin, topic) == [0, 1, 2]
        assert incremental(admin, "", [("log.cleaner.min.compaction.lag.ms", DELETE, None)]) == (0, None)
        wait_until(lambda: _offsets(admin, topic) != [0, 1, 2], 10, "a clean")
        # the key's first record is superseded; the last batch is not cleanable, so the one before
        # it is the latest of the cleanable part (docs/storage.md, *Log compaction*)
        assert _offsets(admin, topic) == [1, 2]
    finally:
        b.stop()


def test_max_connections_per_ip_set_at_run_time_closes_the_next_connection(tmp_path):
    b = InProcessBroker(tmp_path / "data").start()
    try:
        admin = b.client()  # in memory: not a connection the limit counts
        held = WireClient(b.bootstrap)
        held.request(METADATA)
        assert incremental(admin, "", [("max.connections.per.ip", SET, "1")]) == (0, None)
        assert not _answers(b.bootstrap)
        assert incremental(admin, "", [("max.connections.per.ip", DELETE, None)]) == (0, None)
        assert _answers(b.bootstrap)
        held.close()
    finally:
        b.stop()


def test_dynamic_settings_survive_a_restart_with_their_sources(tmp_path):
    b = InProcessBroker(tmp_path / "data").start()
    try:
        admin = b.client()
        assert incremental(admin, "0", [("log.retention.ms", SET, "1000000"), ("num.io.threads", SET, "9")]) == (0, None)
        assert incremental(admin, "", [("log.cleaner.backoff.ms", SET, "2000")]) == (0, None)
        before = describe(admin, BROKER, "0", ["log.retention.ms", "num.io.threads", "log.cleaner.backoff.ms"])
    finally:
        b.stop()
    again = InProcessBroker(tmp_path / "data").start()
    try:
        admin = again.client()
        assert describe(admin, BROKER, "0", ["log.retention.ms", "num.io.threads", "log.cleaner.backoff.ms"]) == before
        assert before["log.retention.ms"][:3] == ("1000000", False, 2)
        assert before["log.cleaner.backoff.ms"][:3] == ("2000", False, 3)
        store = again.broker.store
        assert (store.config.retention_ms, store.config.cleaner_backoff_ms) == (1000000, 2000)  # in force again
    finally:
        again.stop()


def test_what_gregor_reads_at_start_or_cannot_honour_is_refused(tmp_path):
    b = InProcessBroker(tmp_path / "data").start()
    try:
        admin = b.client()
        topic, error, _ = create_topic(admin, {"cleanup.policy": "compact"})
        assert error == 0
        assert incremental(admin, "0", [("sasl.enabled.mechanisms", SET, "PLAIN")]) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [sasl.enabled.mechanisms]")
        assert incremental(admin, "", [("log.cleanup.policy", SET, "compact")]) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [log.cleanup.policy]")
        code, message = incremental(admin, "", [("log.retention.bytes", SET, "1000000")])
        assert (code, topic in message) == (ErrorCode.INVALID_CONFIG, True)
        code, message = incremental(admin, "", [("message.max.bytes", SET, "2000000000")])
        assert (code, "commitlog.segment.bytes" in message) == (ErrorCode.INVALID_CONFIG, True)
        assert describe(admin, BROKER, "", ["log.retention.bytes", "message.max.bytes"]) == {}
    finally:
        b.stop()


def test_a_stored_value_that_does_not_parse_is_not_put_in_force(tmp_path):
    """A dynamic setting is checked when set; one written otherwise (by another version, say) leaves
    the static value in force, and the broker goes on answering."""
    b = InProcessBroker(tmp_path / "data").start()
    try:
        b.broker.store.write_state([(state_key(DEFAULT_NODE, "message.max.bytes"), b"many")])
        admin = b.client()
        wait_until(lambda: describe(admin, BROKER, "", ["message.max.bytes"]), 5, "the record described")
        assert describe(admin, BROKER, "0", ["message.max.bytes"])["message.max.bytes"][0] == "1048588"
    finally:
        b.stop()
