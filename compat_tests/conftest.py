"""The brokers under test and the clients that drive them.

The broker is `--bootstrap HOST:PORT` (or $GREGOR_BOOTSTRAP); without one, every scenario runs
twice, against a fresh Gregor and against a real Apache Kafka 3.9 (tests/kit/kafka.py), both started
here for the session with the same settings (auto-create off, no initial rebalance delay, short
share-group locks), and against Apache Kafka 4.4.0 too (single nodes only); a module whose
scenarios need Kafka 4 (share groups) says so in BROKERS and runs against Gregor and Kafka 4.4.0.
With `--cluster` (or GREGOR_COMPAT_CLUSTER=1) the two are clusters of three nodes instead: a
Gregor broker group coordinated by its own ZooKeeper (tests/kit/group.py) and a 3-voter
KRaft Kafka (tests/kit/kafka_cluster.py). Scenarios may assume nothing else about a broker:
what they need (topics, configs) they create through Kafka APIs, at the broker's default
replication factor (-1), which is every node of a Gregor group and 3 on the Kafka cluster. Where the two brokers knowingly differ, KNOWN_DIFFERENCES marks the cell a
strict xfail with its reason, so a difference that goes away fails the suite too.

Whether the broker is Gregor is detected, not configured: DescribeConfigs on the broker
resource lists `commitlog.segment.bytes`, a setting only Gregor has (Kafka's is
`log.segment.bytes`). `test_gregor_extensions.py` skips unless it is.

A test taking `client` runs once per client (compat_tests.clients.CLIENT_NAMES). When a
client cannot express a step its adapter raises Unsupported, reported as a skip naming it.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import time
from dataclasses import dataclass

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.metadata import MetadataRequest

from compat_tests.clients import (
    CLIENT_NAMES,
    ClientError,
    KafkaClient,
    Unsupported,
    kafka_python,
    make_client,
)
from tests.kit.wire import WireClient
from tests.kit.group import BrokerGroup
from tests.kit.zookeeper import ZOOKEEPER_JAR, ZooKeeperProcess
from tests.kit.gregor import BrokerProcess, start_broker
from tests.kit.kafka import KAFKA_VERSION, KafkaBroker, KafkaUnavailable
from tests.kit.kafka_cluster import KafkaCluster
from tests.kit.tier import FULL

SHARED_SETTINGS = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
                   # consumer-protocol members (java-4.4) heartbeat every 500 ms, not 5 s: a hand-over
                   # waits for a heartbeat
                   "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500",
                   # test_compaction.py: the cleaner runs twice a second
                   "log.cleaner.backoff.ms": "500",
                   # test_transactions.py: timed-out transactions are looked for twice a second
                   "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
# Share groups' locks and delivery limit short enough to show within a scenario (test_share_groups.py);
# Kafka 3.9 does not know these settings and ignores them.
SHARE_SETTINGS = {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "2000",
                  "group.share.delivery.count.limit": "3"}
GREGOR = "gregor"
KAFKA = "apache-kafka"
# Kafka 4.4.0: every scenario runs against it too on single nodes (not in --cluster runs); a module
# whose scenarios Kafka 3.9 cannot run (share groups) lists its brokers in BROKERS and carries the
# kafka_version("4.4.0") mark
KAFKA_4_VERSION = "4.4.0"
KAFKA_4 = f"apache-kafka-{KAFKA_4_VERSION}"
CLUSTER_SIZE = 3

# (scenario function, broker) -> why that broker's answer differs from the other's.
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bootstrap", default=None, metavar="HOST:PORT",
                     help="broker for compat_tests (default: $GREGOR_BOOTSTRAP, else a fresh Gregor)")
    parser.addoption("--cluster", action="store_true", default=False,
                     help="compat_tests against a 3-node Gregor broker group and a 3-node Kafka "
                          "(also GREGOR_COMPAT_CLUSTER=1) instead of single brokers")


def _clusters(config: pytest.Config) -> bool:
    return config.getoption("--cluster") or os.environ.get("GREGOR_COMPAT_CLUSTER") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(os.path.dirname(__file__)):
            continue
        item.add_marker(pytest.mark.compat)
        broker = getattr(item, "callspec", None) and item.callspec.params.get("target")
        reason = KNOWN_DIFFERENCES.get((item.originalname, broker))
        if reason:
            item.add_marker(pytest.mark.xfail(reason=f"known difference on {broker}: {reason}", strict=True))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        given = metafunc.config.getoption("--bootstrap") or os.environ.get("GREGOR_BOOTSTRAP")
        # Kafka 4.4.0 beside 3.9.0 on single nodes; the 3-node runs compare with 3.9.0 only
        clusters = _clusters(metafunc.config)
        default = (GREGOR, KAFKA) if clusters else (GREGOR, KAFKA, KAFKA_4)
        brokers = ["given"] if given else list(getattr(metafunc.module, "BROKERS", default))
        if clusters and not FULL and getattr(metafunc.module, "CLUSTERS_IN_FULL_TIER_ONLY", False):
            brokers = []  # per push this module runs on single nodes only (its own reason says why)
        metafunc.parametrize("target", brokers, indirect=True, scope="session")
    if "client_name" in metafunc.fixturenames:
        metafunc.parametrize("client_name", CLIENT_NAMES)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    try:
        return (yield)
    except Unsupported as e:
        client = pyfuncitem.callspec.params.get("client_name", "the client")
        pytest.skip(f"{client} cannot express this scenario: {e}")


@dataclass
class Target:
    """The broker under test and what was learned about it."""

    bootstrap: str
    is_gregor: bool
    auto_create: bool | None  # auto.create.topics.enable as the broker reports it
    broker_count: int
    process: BrokerProcess | KafkaBroker | BrokerGroup | KafkaCluster | None = None

    def processes(self) -> list[BrokerProcess | KafkaBroker]:
        """The broker processes started for the session: one, or each node of a cluster."""
        if self.process is None:
            return []
        nodes = getattr(self.process, "nodes", None)
        return list(nodes.values()) if nodes is not None else [self.process]


def _describe_target(bootstrap: str, process) -> Target:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        nodes = admin.describe_cluster()["brokers"]
        node = str(nodes[0]["broker_id"])
        found = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)], config_filter="all")
    finally:
        admin.close()
    configs = {k: v["value"] for k, v in found["broker"][node].items()}
    auto = configs.get("auto.create.topics.enable")
    return Target(bootstrap, "commitlog.segment.bytes" in configs, None if auto is None else auto == "true",
                  len(nodes), process)


@pytest.fixture(scope="session")
def target(request, tmp_path_factory) -> Target:
    if request.param == "given":
        bootstrap = request.config.getoption("--bootstrap") or os.environ.get("GREGOR_BOOTSTRAP")
        yield _describe_target(bootstrap, None)
        return
    if _clusters(request.config):
        yield from _cluster_target(request.param, tmp_path_factory)
        return
    if request.param == GREGOR:
        process = start_broker(tmp_path_factory.mktemp("compat"), "gregor", **SHARED_SETTINGS, **SHARE_SETTINGS)
    else:
        version = KAFKA_4_VERSION if request.param == KAFKA_4 else KAFKA_VERSION
        try:
            process = KafkaBroker(tmp_path_factory.mktemp("compat") / "kafka", {**SHARED_SETTINGS, **SHARE_SETTINGS},
                                  version=version)
        except KafkaUnavailable as e:
            pytest.skip(f"NOT RUN against Apache Kafka: {e}")
        process.start()
    try:
        yield _describe_target(process.bootstrap, process)
    finally:
        process.stop()
        shutil.rmtree(process.data_dir, ignore_errors=True)


def _cluster_target(broker: str, tmp_path_factory):
    """A 3-node Gregor group under a ZooKeeper of its own, or a 3-node Kafka; SHARED_SETTINGS on
    every node. The nodes' data goes after the session, their logs stay in the tmp dir."""
    tmp = tmp_path_factory.mktemp("compat-cluster")
    settings = {**SHARED_SETTINGS, **SHARE_SETTINGS}
    if broker == GREGOR:
        if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
            pytest.skip("NOT RUN against a Gregor group: ZooKeeper is not installed (bin/setup-zookeeper)")
        zookeeper = ZooKeeperProcess(tmp / "zookeeper" / "data")
        zookeeper.data_dir.parent.mkdir()
        zookeeper.start()
        group = BrokerGroup(tmp, zookeeper.connect + "/compat", CLUSTER_SIZE, "compat", settings)
        try:
            group.start()
            yield _describe_target(group.bootstrap, group)
        finally:
            group.stop()
            zookeeper.stop()
            for node in group.nodes.values():
                shutil.rmtree(node.data_dir, ignore_errors=True)
        return
    try:
        cluster = KafkaCluster(tmp / "kafka", settings, size=CLUSTER_SIZE,
                               version=KAFKA_4_VERSION if broker == KAFKA_4 else KAFKA_VERSION)
    except KafkaUnavailable as e:
        pytest.skip(f"NOT RUN against Apache Kafka: {e}")
    try:
        cluster.start()
        yield _describe_target(cluster.bootstrap, cluster)
    finally:
        cluster.stop()
        for node in cluster.nodes.values():
            shutil.rmtree(node.data_dir / "logs", ignore_errors=True)


@pytest.fixture
def bootstrap(target: Target) -> str:
    for process in target.processes():
        if process.proc is not None and process.proc.poll() is not None:
            pytest.fail(f"the compat broker {process.data_dir.name} died:\n{process.log()[-4000:]}")
    return target.bootstrap


@pytest.fixture
def client(client_name: str, bootstrap: str) -> KafkaClient:
    return make_client(client_name, bootstrap)


@pytest.fixture
def reference(bootstrap: str) -> KafkaClient:
    """kafka-python, for setting a scenario up and for cross-checks, never as the client under test."""
    return kafka_python.Client(bootstrap)


_counter = itertools.count()


@pytest.fixture
def name(request) -> str:
    """A topic or group name of this test's own."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:120]
    return f"compat-{base}-{os.getpid()}-{next(_counter)}"


@pytest.fixture
def new_topic(reference: KafkaClient, name: str, target: Target):
    """Create a topic through the reference admin client and wait until its metadata is visible
    (on a cluster: on every node, which is where clients of the scenario may ask first)."""
    def create(partitions: int = 1, configs: dict[str, str] | None = None, suffix: str = "") -> str:
        topic = name + suffix
        reference.create_topic(topic, partitions, configs)
        wait_on_every_node(target, reference, topic, partitions)
        return topic

    return create


def eventually(read, done, timeout: float = 15.0):
    """What `read()` returns once `done` says it is so (or the last answer after `timeout`):
    metadata reaches every node of a cluster a moment after the change is acknowledged."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = read()
            if done(answer) or time.monotonic() > deadline:
                return answer
        except ClientError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def wait_for_leaders(address: str, topic: str, partitions: int, timeout: float = 15.0) -> None:
    """Until the node at `address` itself answers Metadata with a leader for every partition of
    `topic` (a cluster's nodes learn of a new topic a moment apart)."""
    deadline = time.monotonic() + timeout
    found: object = None
    while True:
        client = None
        try:
            client = WireClient(address)
            [found] = client.request(MetadataRequest[1](topics=[topic])).topics
            if found.error_code == 0 and len(found.partitions) == partitions and all(
                    p.error_code == 0 and p.leader_id >= 0 for p in found.partitions):
                return
        except (OSError, AssertionError) as exc:
            found = exc
        finally:
            if client is not None:
                client.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"{address} does not show a leader for each of {topic}'s {partitions} partitions "
                                 f"after {timeout} s: {found}")
        time.sleep(0.1)


def wait_on_every_node(target: Target, reference: KafkaClient, topic: str, partitions: int) -> None:
    """Until `topic` shows `partitions` partitions, on a cluster at every node with a leader each:
    a client of the scenario may ask any node first, and Kafka's nodes learn a change a moment apart."""
    wait_for_partitions(reference, topic, partitions)
    for process in target.processes() if target.broker_count > 1 else []:
        wait_for_leaders(process.bootstrap, topic, partitions)


def wait_for_partitions(client: KafkaClient, topic: str, partitions: int, timeout: float = 15.0) -> None:
    """Kafka creates topics asynchronously: poll metadata until every partition shows."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.partition_count(topic) == partitions:
                return
        except ClientError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} does not show {partitions} partitions after {timeout} s")
        time.sleep(0.2)
