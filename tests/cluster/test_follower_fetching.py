"""Follower fetching (KIP-392) against a 3-node Gregor broker group and a 3-node Apache Kafka 3.9,
with the same requests: every node in its own rack (`broker.rack`), RackAwareReplicaSelector on.
A leader sends a consumer whose rack (Fetch v11's rack_id, client.rack) is a follower's to that
follower; the follower serves Fetch v11 and later up to its high watermark, and refuses older
Fetch versions and ListOffsets as Kafka's followers do; librdkafka reads a partition wholly from
the follower in its rack."""

from __future__ import annotations

import json
import shutil
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from tests.kit.wire import WireClient
from tests.kit.wire import produce as wire_produce
from tests.kit.group import BrokerGroup
from tests.kit.zookeeper import ZOOKEEPER_JAR, ZooKeeperProcess
from tests.kit.both import GREGOR, KAFKA
from tests.kit.kafka import KafkaUnavailable
from tests.kit.kafka_cluster import KafkaCluster
from tests.kit.wait import wait_until

pytestmark = pytest.mark.clients
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH = 0, 6, 75
TOPIC = "racked"


def rack(node: int) -> str:
    return f"rack-{node}"


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def cluster(request, tmp_path_factory):
    """(bootstrap, {node id: address}) of three nodes, node n in rack-n, with TOPIC (1 partition,
    replicated on all three) holding 10 records every replica has."""
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == GREGOR:
        if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
            pytest.skip("ZooKeeper is not installed (bin/setup-zookeeper)")
        zookeeper = ZooKeeperProcess(tmp / "zookeeper" / "data")
        zookeeper.data_dir.parent.mkdir()
        zookeeper.start()
        group = BrokerGroup(tmp, f"{zookeeper.connect}/ff-{uuid.uuid4().hex[:8]}", 3, "a",
                            {"replica.selector.class": SELECTOR})
        for node, process in group.nodes.items():
            process.settings["broker.rack"] = rack(node)
        try:
            group.start()
            yield _ready(group.bootstrap, {n: group.address(n) for n in group.nodes})
        finally:
            group.stop()
            zookeeper.stop()
        return
    try:
        kafka = KafkaCluster(tmp / "kafka", {"replica.selector.class": SELECTOR},
                             node_settings={n: {"broker.rack": rack(n)} for n in (1, 2, 3)})
    except KafkaUnavailable as e:
        pytest.skip(f"NOT RUN against Apache Kafka: {e}")
    try:
        kafka.start()
        yield _ready(kafka.bootstrap, {n: node.bootstrap for n, node in kafka.nodes.items()})
    finally:
        kafka.stop()


def _ready(bootstrap: str, addresses: dict[int, str]):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    while True:
        leader, _, isr = partition(WireClient(bootstrap.split(",")[0]))
        if leader >= 0 and sorted(isr) == [1, 2, 3]:
            break
        assert time.monotonic() < deadline, "the topic has no leader with a whole ISR"
        time.sleep(0.3)
    while produce(addresses[leader], [b"v%d" % i for i in range(10)], check=False) != NONE:
        assert time.monotonic() < deadline, "the leader takes no produce"  # Kafka's: a moment after Metadata
        time.sleep(0.3)
    return bootstrap, addresses


def partition(client: WireClient) -> tuple[int, int, list[int]]:
    try:
        r = client.request(MetadataRequest[9](topics=[MetadataRequest[9].MetadataRequestTopic(name=TOPIC)],
                                              allow_auto_topic_creation=False,
                                              include_cluster_authorized_operations=False,
                                              include_topic_authorized_operations=False))
    finally:
        client.close()
    parts = r.topics[0].partitions
    if not parts:
        return -1, -1, []
    return parts[0].leader_id, parts[0].leader_epoch, list(parts[0].isr_nodes)


def produce(address: str, values: list[bytes], check: bool = True) -> int:
    error = wire_produce(address, TOPIC, values)
    assert error == NONE or not check
    return error


def fetch(address: str, version: int, rack_id: str = "", current_leader_epoch: int = -1, offset: int = 0):
    F = FetchRequest.FetchTopic
    fields = {"partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    if version >= 12:
        fields["last_fetched_epoch"] = -1
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
               "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
               "topics": [F(topic=TOPIC, partitions=[F.FetchPartition(**fields)])]}
    if version >= 11:
        request["rack_id"] = rack_id
    client = WireClient(address)
    try:
        return client.request(FetchRequest[version](**request)).responses[0].partitions[0]
    finally:
        client.close()


def count(records) -> int:
    """Records in a fetched partition's record batches (their last offset delta + 1 each)."""
    data, n = bytes(records or b""), 0
    while len(data) >= 61:
        length = int.from_bytes(data[8:12], "big")
        n += int.from_bytes(data[23:27], "big") + 1
        data = data[12 + length:]
    return n


def roles(cluster) -> tuple[int, int, list[int]]:
    bootstrap, _ = cluster
    leader, epoch, _ = partition(WireClient(bootstrap.split(",")[0]))
    return leader, epoch, [n for n in (1, 2, 3) if n != leader]


def test_metadata_lists_each_brokers_rack(cluster):
    bootstrap, _ = cluster
    client = WireClient(bootstrap.split(",")[0])
    try:
        r = client.request(MetadataRequest[9](topics=[], allow_auto_topic_creation=False,
                                              include_cluster_authorized_operations=False,
                                              include_topic_authorized_operations=False))
    finally:
        client.close()
    assert {b.node_id: b.rack for b in r.brokers} == {n: rack(n) for n in (1, 2, 3)}


def test_the_leader_sends_a_consumer_to_the_follower_in_its_rack_and_serves_the_others(cluster):
    _, addresses = cluster
    leader, _, followers = roles(cluster)
    for follower in followers:
        p = fetch(addresses[leader], 11, rack_id=rack(follower))
        assert (p.error_code, p.preferred_read_replica, count(p.records), p.high_watermark) == (NONE, follower, 0, 10)
    for rack_id in (rack(leader), "rack-elsewhere", ""):  # the leader's own rack, no replica there, no rack
        p = fetch(addresses[leader], 11, rack_id=rack_id)
        assert (p.error_code, p.preferred_read_replica, count(p.records)) == (NONE, -1, 10), rack_id


def test_a_follower_serves_fetch_v11_up_to_its_high_watermark_and_refuses_what_kafka_refuses(cluster):
    _, addresses = cluster
    _, epoch, followers = roles(cluster)
    for follower in followers:
        deadline = time.monotonic() + 10
        while (p := fetch(addresses[follower], 12, current_leader_epoch=epoch)).high_watermark < 10:
            assert time.monotonic() < deadline, p  # its high watermark follows the leader's a moment later
            time.sleep(0.1)
        assert (p.error_code, p.preferred_read_replica, count(p.records), p.log_start_offset) == (NONE, -1, 10, 0)
        assert fetch(addresses[follower], 12, offset=10).records in (None, b"")  # nothing past it yet
        assert fetch(addresses[follower], 12, current_leader_epoch=epoch + 1).error_code == UNKNOWN_LEADER_EPOCH
        assert fetch(addresses[follower], 10).error_code == NOT_LEADER_OR_FOLLOWER  # before KIP-392's v11
        T = ListOffsetsRequest.ListOffsetsTopic
        client = WireClient(addresses[follower])
        try:
            r = client.request(ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[T(
                name=TOPIC, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                               timestamp=-1)])]))
        finally:
            client.close()
        assert r.topics[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER  # offsets: the leader's


def test_librdkafka_with_client_rack_reads_the_partition_from_the_follower_in_its_rack(cluster):
    bootstrap, addresses = cluster
    leader, _, followers = roles(cluster)
    follower = followers[0]
    stats: list[dict] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"racked-{uuid.uuid4().hex[:6]}",
                         "client.rack": rack(follower), "enable.auto.commit": False,
                         "statistics.interval.ms": 200, "stats_cb": lambda text: stats.append(json.loads(text))})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10:
            assert time.monotonic() < deadline, got
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        produce(addresses[leader], [b"later"])  # a tail read: the follower's long poll ends with it
        while len(got) < 11:
            assert time.monotonic() < deadline, got
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        # statistics taken after the reads: two more callbacks (a poll serves them)
        counted = len(stats)

        def two_more_statistics() -> bool:
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value())  # an extra record fails the check of `got` below
            return len(stats) >= counted + 2

        wait_until(two_more_statistics, 10, "two more statistics callbacks", interval=0)
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(10)] + [b"later"]
    fetches = {b["nodeid"]: b["req"].get("Fetch", 0) for b in stats[-1]["brokers"].values() if b["nodeid"] > 0}
    assert fetches[follower] > 0, fetches  # it read from the follower its leader named
    partition_stats = stats[-1]["topics"][TOPIC]["partitions"]["0"]
    assert partition_stats["broker"] == follower and partition_stats["leader"] == leader
