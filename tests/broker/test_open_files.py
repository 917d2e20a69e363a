"""A broker against the open-file limit: it takes the hard limit at startup, and a topic
change that still runs out of descriptors is refused with KAFKA_STORAGE_ERROR and a plain
message, while the broker goes on serving."""

from __future__ import annotations

import resource

import pytest
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

from tests.kit.gregor import TEST_SEGMENT_BYTES, BrokerProcess

KAFKA_STORAGE_ERROR = 56


def _broker(tmp_path, soft: int, hard: int) -> BrokerProcess:
    broker = BrokerProcess(tmp_path / "data", {"commitlog.segment.bytes": TEST_SEGMENT_BYTES},
                           open_files=(soft, hard))
    broker.start()
    return broker


def _admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=60_000)


def test_a_low_soft_limit_is_raised_at_startup(tmp_path):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1000:
        pytest.skip("needs a hard limit of at least 1,000 open files")
    broker = _broker(tmp_path, 256, hard)
    try:
        admin = _admin(broker)
        result = admin.create_topics([NewTopic("wide", 600, 1)])
        assert result["topics"][0]["error_code"] == 0
        assert len(admin.describe_topics(["wide"])[0]["partitions"]) == 600
        admin.close()
    finally:
        broker.stop()


def test_running_out_of_open_files_is_a_storage_error_and_the_broker_serves_on(tmp_path):
    broker = _broker(tmp_path, 256, 256)
    try:
        admin = _admin(broker)
        result = admin.create_topics([NewTopic("wide", 600, 1)], raise_errors=False)
        topic = result["topics"][0]
        assert topic["error_code"] == KAFKA_STORAGE_ERROR
        assert "too many open files" in topic["error_message"]
        assert "ulimit -n" in topic["error_message"]
        assert "wide" not in admin.list_topics()
        assert admin.create_topics([NewTopic("narrow", 2, 1)])["topics"][0]["error_code"] == 0
        grown = admin.create_partitions({"narrow": NewPartitions(600)}, raise_errors=False)
        assert grown.results[0].error_code == KAFKA_STORAGE_ERROR
        assert len(admin.describe_topics(["narrow"])[0]["partitions"]) == 2
        admin.close()
        assert broker.proc.poll() is None
    finally:
        broker.stop()
