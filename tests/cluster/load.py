"""A producer's load over a broker group, and the checks of what it acknowledged against what a group serves."""

from __future__ import annotations

import threading
import time

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from compat_tests.clients import ClientError, Message, make_client
from tests.kit.group import BrokerGroup


PARTITIONS = 3


CHUNK = 300  # records per produce call of the load loop


def create_topic(group: BrokerGroup, topic: str, partitions: int = PARTITIONS, **configs: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=group.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, partitions, group.size, topic_configs=configs)])
    finally:
        admin.close()


def part_of(index: int) -> int:
    return index * PARTITIONS // CHUNK


class LoadLoop(threading.Thread):
    """Produces numbered chunks through one client until stopped; remembers what was acknowledged."""

    def __init__(self, client, topic: str) -> None:
        super().__init__(daemon=True)
        self.client, self.topic = client, topic
        self.stop_event = threading.Event()
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset) acknowledged
        self.sent: set[bytes] = set()
        self.chunks_acked = 0
        self.failures: list[str] = []

    def run(self) -> None:
        chunk = 0
        while not self.stop_event.is_set():
            values = [f"{chunk:05d}-{i:04d}".encode() for i in range(CHUNK)]
            self.sent.update(values)
            # in partition runs: kcat sends each run with one process
            messages = [Message(v, partition=part_of(i)) for i, v in enumerate(values)]
            try:
                deliveries = self.client.produce(self.topic, messages)
            except ClientError as exc:  # not acknowledged: may or may not be stored, never twice
                self.failures.append(str(exc)[:200])
                time.sleep(0.2)
            else:
                if deliveries is not None:
                    for value, d in zip(values, deliveries):
                        self.acked[value] = (d.partition, d.offset)
                else:
                    self.acked.update({v: (part_of(i), -1) for i, v in enumerate(values)})
                self.chunks_acked += 1
            chunk += 1

    def wait_chunks(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.chunks_acked < count:
            assert time.monotonic() < deadline, f"only {self.chunks_acked} chunks acknowledged: {self.failures[-3:]}"
            time.sleep(0.1)


def read_all(group: BrokerGroup, topic: str, partitions: int = PARTITIONS) -> dict[int, list]:
    reader = make_client("kafka-python", group.bootstrap)
    return {p: reader.consume(topic, [p], "earliest", timeout=60) for p in range(partitions)}


def check_log(stored: dict[int, list], load: LoadLoop) -> None:
    """Every acknowledged record at its acknowledged offset, no record twice, each chunk's records
    in order within their partition, nothing stored that was never sent."""
    where: dict[bytes, tuple[int, int]] = {}
    duplicates = []
    for partition, records in stored.items():
        for r in records:
            if r.value in where:
                duplicates.append(r.value)
            where[r.value] = (partition, r.offset)
    assert not duplicates, f"{len(duplicates)} records stored twice, e.g. {duplicates[:5]}"
    assert set(where) <= load.sent, "records nobody sent"
    lost = [v for v, at in load.acked.items() if v not in where or (at[1] >= 0 and where[v] != at)]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:5]}"
    for partition, records in stored.items():
        last: dict[bytes, bytes] = {}
        for r in records:
            chunk, index = r.value.split(b"-")
            assert last.get(chunk, b"") < index, f"partition {partition}: {r.value!r} after {last[chunk]!r}"
            last[chunk] = index
