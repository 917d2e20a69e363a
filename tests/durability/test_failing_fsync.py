"""A commitlog fsync that fails under a running broker (flush.mode=sync), made real with an
LD_PRELOAD shim over libc's fsync/fdatasync (failing_fsync.c): the produce answers of the failed
group commit and of every later append are KAFKA_STORAGE_ERROR, never NONE, even once fsync works
again (a retried fsync can "succeed" after the kernel dropped the pages); reads go on; the log
and /metrics say the log directory is offline; a restart recovers what was acknowledged."""

from __future__ import annotations

import urllib.request

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaStorageError

from tests.durability.fsync_shim import shim  # noqa: F401 - the fixture that builds the shim
from tests.kit.gregor import TEST_SEGMENT_BYTES, BrokerProcess

def produce(bootstrap: str, values: list[bytes]) -> list:
    """Each value as its own acks=all produce request, no retries: its offset, or the error."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, linger_ms=0,
                             max_in_flight_requests_per_connection=1)
    out = []
    for value in values:
        try:
            out.append(producer.send("t", value, partition=0).get(timeout=30).offset)
        except KafkaStorageError as e:
            out.append(e)
    producer.close()
    return out


def read_all(bootstrap: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = TopicPartition("t", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = [r.value for r in consumer]
    consumer.close()
    return values


def test_a_failed_fsync_is_never_acknowledged_and_takes_the_log_directory_offline(tmp_path, shim):
    flag = tmp_path / "fail-fsync"
    broker = BrokerProcess(tmp_path / "data", {"flush.mode": "sync", "commitlog.segment.bytes": TEST_SEGMENT_BYTES},
                           extra_args=["--admin-port", "0"],
                           env={"LD_PRELOAD": str(shim), "GREGOR_FAIL_FSYNC_FLAG": str(flag)})
    broker.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics({"t": {"num_partitions": 1, "replication_factor": 1}})
        admin.close()
        assert produce(broker.bootstrap, [b"durable-0", b"durable-1"]) == [0, 1]

        flag.touch()  # the disk starts failing
        failed = produce(broker.bootstrap, [b"lost-2"])
        flag.unlink()  # fsync works again: the broker must not trust it
        later = produce(broker.bootstrap, [b"refused-3", b"refused-4"])
        assert all(isinstance(e, KafkaStorageError) for e in failed + later), failed + later

        assert read_all(broker.bootstrap)[:2] == [b"durable-0", b"durable-1"]  # reads go on
        log = broker.log()
        assert "is offline" in log and "fsync failed" in log, log[-3000:]
        admin_at = next(line.split("http://")[1].split()[0].rstrip("/")
                        for line in log.splitlines() if "admin API on http://" in line)
        metrics = urllib.request.urlopen(f"http://{admin_at}/metrics", timeout=10).read().decode()
        assert "gregor_log_dir_offline 1.0" in metrics
    finally:
        broker.stop()

    broker.start()  # restart: recovery from the commitlog, appends accepted again
    try:
        values = read_all(broker.bootstrap)
        assert values[:2] == [b"durable-0", b"durable-1"]
        assert produce(broker.bootstrap, [b"after-restart"]) == [len(values)]
        assert read_all(broker.bootstrap)[-1] == b"after-restart"
    finally:
        broker.stop()
