"""A real ZooKeeper (Debian's, started by bin/zookeeper) and broker groups of real Gregor nodes on
loopback, for the replication and failover tests. Each test gets its own chroot, so one ZooKeeper
serves the session."""

from __future__ import annotations

import shutil
import uuid

import pytest

from tests.kit.group import BrokerGroup
from tests.kit.zookeeper import ZOOKEEPER_JAR, ZooKeeperProcess


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory) -> ZooKeeperProcess:
    if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
        pytest.skip("ZooKeeper is not installed (bin/setup-zookeeper: apt-get install zookeeper)")
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper") / "data")
    zk.start()
    yield zk
    zk.stop()


@pytest.fixture
def broker_group(tmp_path, zookeeper):
    """make(size=3, name="a", **settings): a started group under this test's own chroot."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    made: list[BrokerGroup] = []

    def make(size: int = 3, name: str = "a", first_id: int = 1, start: bool = True, **settings: str) -> BrokerGroup:
        group = BrokerGroup(tmp_path, zookeeper.connect + chroot, size, name, dict(settings), first_id=first_id)
        made.append(group)
        return group.start() if start else group

    yield make
    for group in made:
        group.stop()


@pytest.fixture(scope="session")
def calm_group(tmp_path_factory, zookeeper):
    """One 3-node group with the default settings, shared by the tests that kill, stop and
    reconfigure nothing (each uses topic names of its own); started once, under its own chroot."""
    group = BrokerGroup(tmp_path_factory.mktemp("calm-group"), zookeeper.connect + "/calm", 3, "a", {})
    for node in group.nodes.values():
        node.extra_args = ["--admin-port", "0"]  # the metrics test reads /metrics
    group.start()
    yield group
    group.stop()
