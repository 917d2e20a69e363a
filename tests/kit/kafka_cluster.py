"""A 3-node Apache Kafka 3.9 cluster beside a Gregor broker group: KRaft on loopback, each node a
broker and a controller (tests/kit/kafka.py's KafkaBroker, node ids 1..size), the
nodes one static quorum (`controller.quorum.voters`) formatted with one cluster id, each with its
own data dir and ports from tests/kit/ports.py (below the ephemeral range). Every node keeps its ports across a restart.

The internal topics are replicated as a production cluster's are (replication factor 3,
min.insync.replicas 2), and so is a topic created with the broker's default replication factor
(-1). Each JVM gets a 512 MB heap: three of them share the test machine.
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

from tests.kit.kafka import KAFKA_VERSION, KafkaBroker, Quorum, cluster_id
from tests.kit.ports import free_port

REPLICATED = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}
NODE_HEAP = "512m"


class KafkaCluster:
    """Nodes 1..size; `settings` go to every node (after REPLICATED, so they can override it),
    `node_settings` to one node each (broker.rack). Each node listens on PLAINTEXT, which the
    nodes also talk over, unless `inter_broker` names another protocol (SSL: with the ssl.*
    settings in `settings`): then each node has a listener of that protocol too, and
    inter.broker.listener.name is it."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None, size: int = 3,
                 version: str = KAFKA_VERSION, log_level: str = "WARN", heap: str = NODE_HEAP,
                 node_settings: dict[int, dict[str, str]] | None = None, inter_broker: str = "PLAINTEXT") -> None:
        self.data_dir = data_dir
        self.settings = {**REPLICATED, **(settings or {})}
        self.node_settings = node_settings or {}
        if "listeners" in self.settings or "inter.broker.listener.name" in self.settings:
            raise ValueError("a cluster node's listeners come from inter_broker, each on a port of its own")
        self.protocols = ["PLAINTEXT"] if inter_broker == "PLAINTEXT" else ["PLAINTEXT", inter_broker]
        if inter_broker != "PLAINTEXT":
            self.settings["inter.broker.listener.name"] = inter_broker
        self.size = size
        self.version = version
        self.log_level = log_level
        self.heap = heap
        self.nodes: dict[int, KafkaBroker] = {}
        self._new_nodes()

    def _new_nodes(self) -> None:
        """Fresh ports and cluster id for every node (the nodes are not formatted yet)."""
        ids = range(1, self.size + 1)
        quorum = Quorum(cluster_id(), {node: free_port() for node in ids})
        self.nodes = {
            node: KafkaBroker(self.data_dir / f"node{node}",
                              {**self.settings, **self.node_settings.get(node, {}),
                               "listeners": ",".join(f"{p}://127.0.0.1:{free_port()}" for p in self.protocols)},
                              self.version, self.log_level, node_id=node, quorum=quorum, heap=self.heap)
            for node in ids}

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    def start(self, timeout: float = 240.0) -> str:
        """Format and start every node, return once each node names all of them in Metadata and
        answers FindCoordinator and InitProducerId (KafkaBroker's warm-up)."""
        for _ in range(3):  # a port handed out by the OS can be taken again before Kafka binds it
            for node in self.nodes.values():  # all at once: no node is ready before a quorum is up
                node.launch()
            deadline = time.monotonic() + timeout
            if all(node._wait_ready(deadline, brokers=self.size) for node in self.nodes.values()) \
                    and all(node._warm_up(deadline) for node in self.nodes.values()):
                return self.bootstrap
            self.stop()
            if "Address already in use" not in self.log():
                break
            for node in self.nodes.values():  # formatted with the ports just lost: start over
                shutil.rmtree(node.data_dir, ignore_errors=True)
            self._new_nodes()
        raise RuntimeError(f"Kafka {self.version} cluster of {self.size} did not start within {timeout}s:\n"
                           f"{self.log()[-6000:]}")

    def stop(self, timeout: float = 30.0) -> None:
        for node in self.nodes.values():  # SIGTERM to all first: each waits for the others' shutdown
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            node.stop(timeout=timeout)

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        """Signal one node (SIGKILL: a crash) and wait for it to exit."""
        process = self.nodes[node]
        if process.proc is not None and process.proc.poll() is None:
            process.proc.send_signal(sig)
        process.stop()

    def restart(self, node: int, timeout: float = 120.0) -> None:
        """Start a stopped node on its ports and data again; return once it is back in Metadata."""
        process = self.nodes[node]
        process.launch()
        if not process._wait_ready(time.monotonic() + timeout, brokers=self.size):
            raise RuntimeError(f"Kafka node {node} did not rejoin within {timeout}s:\n{process.log()[-3000:]}")

    def log(self) -> str:
        return "".join(f"--- node {n} ---\n{node.log()[-3000:]}\n" for n, node in self.nodes.items())
