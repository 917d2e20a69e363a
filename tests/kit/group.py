"""The test kit's broker groups: real Gregor nodes on loopback coordinated through a ZooKeeper
(tests/kit/zookeeper.py), and the admin calls tests use to wait on them."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaAdminClient
from kazoo.client import KazooClient

from tests.kit.gregor import TEST_SEGMENT_BYTES, BrokerProcess
from tests.kit.ports import free_port
from tests.kit.zookeeper import SESSION_TIMEOUT_MS


@dataclass
class BrokerGroup:
    """Nodes 1..size of broker group `name`, each on a port of its own kept across restarts."""

    tmp: Path
    connect: str  # zookeeper.connect with this group's chroot
    size: int
    name: str = "a"
    settings: dict[str, str] = field(default_factory=dict)
    nodes: dict[int, BrokerProcess] = field(default_factory=dict)
    first_id: int = 1

    def __post_init__(self) -> None:
        for node in range(self.first_id, self.first_id + self.size):
            settings = {"node.id": str(node), "zookeeper.connect": self.connect, "broker.group": self.name,
                        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                        "commitlog.segment.bytes": TEST_SEGMENT_BYTES, "group.initial.rebalance.delay.ms": "0",
                        **self.settings}
            self.nodes[node] = BrokerProcess(self.tmp / f"{self.name}-node{node}", settings, port=free_port())

    def start(self) -> BrokerGroup:
        """The first node alone, so that it becomes the master (tests count on it), then the
        others side by side: a node's start is mostly its interpreter's, and one at a time they
        were a large part of each cluster test."""
        first, *others = self.nodes.values()
        first.start(timeout=60)
        for node in others:
            node.launch()
        for node in others:
            node.wait_ready(timeout=60)
        self.wait_sync_state_set(self.size)
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())

    def address(self, node: int) -> str:
        return f"127.0.0.1:{self.nodes[node].port}"

    def state(self) -> tuple[dict | None, list[int]]:
        """The group's ZooKeeper record and the live node ids, as ZooKeeper has them now."""
        zk = KazooClient(hosts=self.connect, timeout=5)
        zk.start(10)
        try:
            try:
                record = json.loads(zk.get(f"/groups/{self.name}/state")[0])
            except Exception:  # noqa: BLE001 - no record yet
                record = None
            live = sorted(int(c) for c in zk.get_children("/brokers/ids"))
        finally:
            zk.stop()
            zk.close()
        return record, live

    def replication_address(self, node: int) -> tuple[str, int]:
        """Where `node` takes followers (and other groups' transaction markers), as ZooKeeper has it."""
        zk = KazooClient(hosts=self.connect, timeout=5)
        zk.start(10)
        try:
            registration = json.loads(zk.get(f"/brokers/ids/{node}")[0])
        finally:
            zk.stop()
            zk.close()
        return registration["replication_host"], registration["replication_port"]

    def master(self, timeout: float = 30.0, other_than: int | None = None) -> int:
        """The live master (waiting for one, and for one other than `other_than`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            record, live = self.state()
            if record and record["master"] in live and record["master"] != other_than:
                return record["master"]
            time.sleep(0.1)
        raise AssertionError(f"no master of group {self.name} after {timeout}s: {self.state()}")

    def wait_sync_state_set(self, members: int, timeout: float = 60.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            record, live = self.state()
            if record and len(record["sync_state_set"]) == members and record["master"] in live:
                return record["sync_state_set"]
            time.sleep(0.2)
        raise AssertionError(f"sync-state set of group {self.name} not {members} nodes after {timeout}s: "
                             f"{self.state()}")

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        self.nodes[node].stop(sig)

    def restart(self, node: int) -> None:
        self.nodes[node].start(timeout=60)

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is None:
                node.stop(signal.SIGKILL)


def describe(boot: str, topic: str) -> list[dict]:
    admin = KafkaAdminClient(bootstrap_servers=boot)
    try:
        return sorted(admin.describe_topics([topic])[0]["partitions"], key=lambda p: p["partition_index"])
    finally:
        admin.close()


def wait_described(boot: str, topic: str, partitions: int, timeout: float = 30, whole_isr: bool = False) -> list[dict]:
    """The topic's partitions once each has a leader (and, with `whole_isr`, once the answering node
    lists every replica in sync: a node learns another group's sync-state set a moment after
    ZooKeeper has it, as Kafka's brokers learn the controller's metadata)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            parts = describe(boot, topic)
        except Exception:  # noqa: BLE001 - not everywhere yet
            parts = []
        if len(parts) == partitions and all(p["leader_id"] >= 0 and (not whole_isr or sorted(p["isr_nodes"]) ==
                                                                      sorted(p["replica_nodes"])) for p in parts):
            return parts
        assert time.monotonic() < deadline, f"{topic} not served with {partitions} partitions"
        time.sleep(0.3)
