"""Several broker groups in one cluster: a topic's partitions spread over the groups, each served
by its group's master; consumer-group and transaction coordinators spread over the groups'
masters; new partitions placed, topics deleted everywhere; transactions whose partitions lie in
several groups commit and abort as one, and so do the consumer offsets a transaction sends to a
consumer group another group's master coordinates; a failover in one group leaves the other
serving."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest
import trio
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewPartitions, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest

from broker.cluster.node import Cluster
from broker.cluster.state import GroupRecord, coordinator_group
from broker.cluster.topics import ClusterTopics
from broker.cluster.zk import ZooKeeper
from compat_tests.clients import Message, make_client
from store import Store
from tests.kit.wire import WireClient
from tests.kit.group import wait_described
from tests.store.conftest import tiny_config
from tests.cluster.transactions import transactions_read_committed

pytestmark = pytest.mark.clients


@pytest.fixture
def two_groups(broker_group):
    """Groups a (nodes 1, 2) and b (nodes 3, 4) under one ZooKeeper chroot."""
    a = broker_group(2, "a", first_id=1)
    b = broker_group(2, "b", first_id=3)
    return a, b


def bootstrap(*groups) -> str:
    return ",".join(g.bootstrap for g in groups)


def create(boot: str, topic: str, partitions: int, rf: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, partitions, rf)])
    finally:
        admin.close()


def test_partitions_spread_over_the_groups_each_served_by_its_master(two_groups):
    a, b = two_groups
    boot = bootstrap(a, b)
    create(boot, "spread", 4)
    parts = wait_described(boot, "spread", 4, whole_isr=True)
    masters = {a.master(), b.master()}
    assert {p["leader_id"] for p in parts} == masters
    for p in parts:
        group = a if p["leader_id"] in a.nodes else b
        assert sorted(p["replica_nodes"]) == sorted(group.nodes) and sorted(p["isr_nodes"]) == sorted(group.nodes)
    client = make_client("kafka-python", boot)
    sent = [Message(f"v{i}".encode(), partition=i % 4) for i in range(200)]
    client.produce("spread", sent)
    got = [r.value for p in range(4) for r in client.consume("spread", [p], "earliest", timeout=30)]
    assert sorted(got) == sorted(m.value for m in sent)
    # a node of group a refuses a partition of group b
    b_partition = next(p["partition_index"] for p in parts if p["leader_id"] in b.nodes)
    only_a = make_client("confluent-kafka", a.address(a.master()))  # is told where the partition's leader is
    assert only_a.produce("spread", [Message(b"routed", partition=b_partition)])


def test_placement_reads_the_groups_from_zookeeper_not_from_the_nodes_last_step(zookeeper, tmp_path):
    """CreateTopics and CreatePartitions at a master whose last look at ZooKeeper (a step) came
    before another group elected its master: that group still gets its share. (Before, CI saw a
    topic made right after two groups started land wholly on the creating master's group.)"""
    zk = ZooKeeper(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:12]}", "b", 4000, lambda: None)
    zk.start(10)
    store = Store.open(tmp_path / "data", tiny_config())
    try:
        for name, master in (("a", 1), ("b", 3)):
            zk.client.create(f"/groups/{name}/state", GroupRecord(master, 1, (master,)).encode(), makepath=True)
        # its steps have seen no group yet: only its own
        stale = SimpleNamespace(group="b", groups={}, group_names=lambda: ["b"], zk=zk, store=store, leading=True)
        topics = ClusterTopics(stale)
        trio.run(topics.create_topic, "spread", 4, {})
        assert sorted(topics.placements["spread"]) == ["a", "a", "b", "b"]
        trio.run(topics.change_topic, "spread", 6)
        assert sorted(topics.placements["spread"][4:]) == ["a", "b"]
        assert zk.topics()[0]["spread"][0].placement == topics.placements["spread"]
    finally:
        store.close()
        zk.stop()


def test_a_follower_that_has_not_read_a_topics_placement_reports_no_leader_not_its_own_master(tmp_path):
    """A follower's commitlog can bring a topic before its step reads the topic's placement from
    ZooKeeper. Metadata then says "leader not available" (as Kafka does for a topic being made),
    not "all partitions on this group" (CI: a topic spread over two groups described as wholly
    group a's, from group a's follower). A master's unplaced topics stay its own."""
    store = Store.open(tmp_path / "data", tiny_config())
    try:
        store.create_topic("spread", 2, {})
        config = {"node.id": 2, "broker.group": "a", "replica.lag.time.max.ms": 10000,
                  "zookeeper.connect": "127.0.0.1:1/unused", "zookeeper.session.timeout.ms": 4000,
                  "security.inter.broker.protocol": "PLAINTEXT", "failed.authentication.limit": 10,
                  "failed.authentication.window.ms": 60000}
        cluster = Cluster(SimpleNamespace(config=config, store=store, tls_settings=lambda listener: config))
        cluster.record, cluster.members = GroupRecord(1, 3, (1, 2)), [1, 2]
        cluster.groups = {"a": (cluster.record, [1, 2]), "b": (GroupRecord(3, 1, (3, 4)), [3, 4])}
        cluster.live = {n: {} for n in (1, 2, 3, 4)}
        assert [cluster.partition_view("spread", i) for i in range(2)] == [(-1, 0, [], [], [])] * 2
        cluster.topics.placements["spread"] = ("b", "a")  # its step read ZooKeeper
        assert [cluster.partition_view("spread", i) for i in range(3)] == [
            (3, 1, [3, 4], [3, 4], []), (1, 3, [1, 2], [1, 2], []), (-1, 0, [], [], [])]  # a partition not placed yet
        cluster.topics.placements.clear()
        cluster.leading_epoch = 3  # a master: a topic it had before joining is this group's
        cluster.record, cluster.live = GroupRecord(2, 3, (1, 2)), {n: {} for n in (1, 2, 3, 4)}
        assert cluster.group_of("spread", 1) == "a"
    finally:
        store.close()


def test_coordinators_spread_over_the_groups_masters_and_offsets_commit_there(two_groups):
    a, b = two_groups
    boot = bootstrap(a, b)
    create(boot, "coordinated", 2)
    wait_described(boot, "coordinated", 2)
    wire = WireClient(a.address(1))
    coordinators = {}
    for i in range(40):
        key = f"group-{i}"
        r = wire.request(FindCoordinatorRequest[3](key=key, key_type=0))
        assert r.error_code == 0, r
        coordinators[key] = r.node_id
    wire.close()
    assert set(coordinators.values()) == {a.master(), b.master()}
    make_client("kafka-python", boot).produce("coordinated", [Message(f"m{i}".encode(), partition=i % 2)
                                                               for i in range(20)])
    on_b = next(k for k, node in coordinators.items() if node in b.nodes)
    on_a = next(k for k, node in coordinators.items() if node in a.nodes)
    for group_id in (on_a, on_b):
        consumer = KafkaConsumer("coordinated", bootstrap_servers=boot, group_id=group_id,
                                 auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=8000)
        seen = sum(1 for _ in consumer)
        consumer.commit()
        consumer.close()
        assert seen == 20
        again = KafkaConsumer("coordinated", bootstrap_servers=boot, group_id=group_id,
                              auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=4000)
        assert sum(1 for _ in again) == 0  # resumes from the committed offsets
        again.close()


def test_new_partitions_are_placed_and_deleted_topics_go_everywhere(two_groups):
    a, b = two_groups
    boot = bootstrap(a, b)
    create(boot, "growing", 2)
    wait_described(boot, "growing", 2)
    admin = KafkaAdminClient(bootstrap_servers=boot)
    try:
        admin.create_partitions({"growing": NewPartitions(6)})
        parts = wait_described(boot, "growing", 6)
        assert {p["leader_id"] for p in parts} == {a.master(), b.master()}
        client = make_client("kafka-python", boot)
        client.produce("growing", [Message(f"p{i}".encode(), partition=i) for i in range(6)])
        assert all(len(client.consume("growing", [i], "earliest", timeout=30)) == 1 for i in range(6))
        admin.delete_topics(["growing"])
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    while any("growing" in KafkaAdminClient(bootstrap_servers=g.address(g.master())).list_topics() for g in (a, b)):
        assert time.monotonic() < deadline, "the topic is still listed"
        time.sleep(0.5)


def test_a_transaction_over_partitions_of_both_groups_commits_and_aborts_as_one(two_groups):
    a, b = two_groups
    boot = bootstrap(a, b)
    create(boot, "txn-spread", 4)
    parts = wait_described(boot, "txn-spread", 4)
    assert len({p["leader_id"] for p in parts}) == 2
    assert sorted(transactions_read_committed(boot, "txn-spread", (True, False))) == \
        sorted(f"c{i}".encode() for i in range(8))


def _split_group(prefix: str) -> str:
    """A consumer group that broker group b coordinates, whose transactional id (the compat
    clients' `<group>-txn`) broker group a coordinates."""
    while True:
        group = f"{prefix}-{uuid.uuid4().hex[:6]}"
        if coordinator_group(group, ["a", "b"]) == "b" and coordinator_group(f"{group}-txn", ["a", "b"]) == "a":
            return group


@pytest.mark.parametrize("client_name", ["confluent-kafka", "kafka-python", "java"])
def test_transactional_offsets_commit_at_the_consumer_groups_coordinator_in_another_group(two_groups,
                                                                                          client_name):
    """Clients send TxnOffsetCommit to the consumer group's coordinator (b's master here), and
    AddOffsetsToTxn and EndTxn to the transaction's (a's master): the offsets wait there until
    the transaction's marker commits or drops them. Before, b's master closed the connection
    (it does not coordinate the transactional id) and the client failed with a transport error."""
    a, b = two_groups
    boot = bootstrap(a, b)
    source, sink = f"src-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    create(boot, source, 2)
    create(boot, sink, 2)
    wait_described(boot, source, 2)
    wait_described(boot, sink, 2)
    client = make_client(client_name, boot)
    group = _split_group("split")
    client.produce(source, [Message(f"first{i}".encode(), partition=i % 2) for i in range(10)])
    assert len(client.transform(group, source, sink, 10, commit=True)) == 10
    assert client.committed(group, source, [0, 1]) == {0: 5, 1: 5}
    client.produce(source, [Message(f"second{i}".encode(), partition=i % 2) for i in range(4)])
    read = client.transform(group, source, sink, 4, commit=False)
    assert sorted(r.value for r in read) == sorted(f"second{i}".encode() for i in range(4))  # from the commit
    assert client.committed(group, source, [0, 1]) == {0: 5, 1: 5}  # the abort left them
    read = client.transform(group, source, sink, 4, commit=True)
    assert sorted(r.value for r in read) == sorted(f"second{i}".encode() for i in range(4))
    assert client.committed(group, source, [0, 1]) == {0: 7, 1: 7}


@pytest.mark.crash
def test_a_failover_in_one_group_leaves_the_other_serving(two_groups):
    a, b = two_groups
    boot = bootstrap(a, b)
    create(boot, "independent", 2)
    parts = wait_described(boot, "independent", 2)
    on_a = next(p["partition_index"] for p in parts if p["leader_id"] in a.nodes)
    on_b = next(p["partition_index"] for p in parts if p["leader_id"] in b.nodes)
    client = make_client("kafka-python", boot)
    client.produce("independent", [Message(b"a-before", partition=on_a), Message(b"b-before", partition=on_b)])
    old = b.master()
    b.kill(old)
    assert client.produce("independent", [Message(b"a-during", partition=on_a)])  # group a never stopped
    b.master(other_than=old)
    client.produce("independent", [Message(b"b-after", partition=on_b)])
    assert [r.value for r in client.consume("independent", [on_a], "earliest", timeout=30)] == [b"a-before", b"a-during"]
    assert [r.value for r in client.consume("independent", [on_b], "earliest", timeout=30)] == [b"b-before", b"b-after"]
