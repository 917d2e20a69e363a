"""A real Kafka Connect 3.9 worker in distributed mode, against Gregor and Apache Kafka 3.9.0 with
the same steps: its compacted config/offset/status topics, a FileStreamSource connector (file ->
topic) and a FileStreamSink connector (topic -> file) created through the REST API, and a restart
after which both resume where they left off (issue 22, part 3)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from tests.apps.kafka_apps import ConnectWorker, apps_libs
from tests.kit.wait import wait_until

pytestmark = pytest.mark.apps

TOPIC = "file-lines"


def _wait_for_lines(sink: Path, expected: list[str], worker: ConnectWorker, timeout: float = 60.0) -> None:
    """Until the sink file holds exactly `expected`; fails as soon as it holds anything else."""
    deadline = time.monotonic() + timeout
    got: list[str] = []
    while time.monotonic() < deadline:
        text = sink.read_text() if sink.exists() else ""
        got = text[:text.rfind("\n") + 1].splitlines()  # a line being written is not there yet
        assert got == expected[:len(got)], f"the sink file diverged at line {_diverges(got, expected)}"
        if got == expected:
            return
        time.sleep(0.25)
    raise AssertionError(f"the sink file has {len(got)} of {len(expected)} lines after {timeout}s:\n"
                         f"{worker.log()[-4000:]}")


def _source_offsets(worker: ConnectWorker) -> list | None:
    """The file-source connector's offsets as the worker's REST API answers them; None until it answers."""
    status, offsets = worker.rest("GET", "/connectors/file-source/offsets")
    return [o["offset"] for o in offsets["offsets"]] if status == 200 else None


def _diverges(got: list[str], expected: list[str]) -> int:
    return next(i for i, (a, b) in enumerate(zip(got + [None], expected + [None])) if a != b)


def _sink_committed(bootstrap: str, group: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    found = offsets.get(TopicPartition(TOPIC, 0))
    return found.offset if found else -1


def _end_offset(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(TOPIC, 0)
        return consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def _cleanup_policies(bootstrap: str, topics: list[str]) -> dict[str, str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics],
                                       config_filter="all")
    finally:
        admin.close()
    return {name: configs["cleanup.policy"]["value"] for name, configs in found["topic"].items()}


def test_file_connectors_resume_where_they_left_off_after_the_worker_restarts(broker, tmp_path):
    libs = apps_libs()
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"line {i} of the first run" for i in range(500)]
    source.write_text("".join(line + "\n" for line in first))
    worker = ConnectWorker(libs, tmp_path / "connect", broker.bootstrap, group="connect-cluster")
    worker.start()
    try:
        worker.create_connector("file-source", {
            "connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source), "topic": TOPIC,
            "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"})
        worker.create_connector("file-sink", {
            "connector.class": "FileStreamSink", "tasks.max": "1", "file": str(sink), "topics": TOPIC})
        _wait_for_lines(sink, first, worker)
        assert worker.running("file-source") and worker.running("file-sink")
    finally:
        code = worker.stop()
    assert code is not None, f"the worker did not stop on SIGTERM:\n{worker.log()[-3000:]}"
    policies = _cleanup_policies(broker.bootstrap, [f"connect-cluster-{t}" for t in ("configs", "offsets", "status")])
    assert set(policies.values()) == {"compact"}

    second = [f"line {i} of the second run" for i in range(300)]
    with source.open("a") as f:
        f.write("".join(line + "\n" for line in second))
    worker.start()
    try:
        _wait_for_lines(sink, first + second, worker)
        assert worker.running("file-source") and worker.running("file-sink")
        deadline = time.monotonic() + 30
        while _sink_committed(broker.bootstrap, "connect-file-sink") < len(first + second):
            assert time.monotonic() < deadline, "the sink never committed its last offset"
            time.sleep(0.5)
        # The source's offset, flushed every second, reaches its file's end: read back through the REST
        # API from the offsets topic. (A line sent twice would show in the end offset checked below.)
        end = [{"position": source.stat().st_size}]
        wait_until(lambda: _source_offsets(worker) == end, 30, "the source's flushed offset at its file's end",
                   interval=0.25)
    finally:
        code = worker.stop()
    assert code is not None, f"the worker did not stop on SIGTERM:\n{worker.log()[-3000:]}"
    assert sink.read_text().splitlines() == first + second
    assert _end_offset(broker.bootstrap) == len(first + second)
