"""A network partition: the master is cut off from ZooKeeper and from its followers (TCP proxies
between them, cut by the test). No split brain: the isolated master acknowledges no acks=all
write once cut off, a follower becomes master, and when the partition heals the old master
truncates what it alone had and rejoins; nothing acknowledged is lost."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.producer import ProduceRequest

from compat_tests.clients import Message, make_client
from protocol.errors import ErrorCode
from tests.kit.wire import batch
from tests.kit.wire import WireClient
from tests.kit.group import BrokerGroup
from tests.kit.ports import free_port
from tests.cluster.tcp_proxy import TcpProxy
from tests.cluster.load import create_topic, read_all

pytestmark = pytest.mark.crash


def produce_all(client: WireClient, topic: str, value: bytes) -> int:
    """An acks=all produce of one record to partition 0, straight to one node: its error code."""
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=2000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch(1, value))])])
    return client.request(request).responses[0].partition_responses[0].error_code


def test_isolated_master_acknowledges_nothing_and_loses_nothing(tmp_path, zookeeper):
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    group = BrokerGroup(tmp_path, zookeeper.connect + chroot, 3)
    replication_port = free_port()
    with TcpProxy(zookeeper.port) as to_zookeeper, TcpProxy(replication_port) as to_followers:
        group.nodes[1].settings.update({
            "zookeeper.connect": f"127.0.0.1:{to_zookeeper.port}{chroot}",
            "replication.port": str(replication_port),
            "replication.advertised.listener": f"127.0.0.1:{to_followers.port}"})
        try:
            group.nodes[1].start(timeout=60)  # first: master of epoch 1
            for node in (2, 3):
                group.nodes[node].start(timeout=60)
            group.wait_sync_state_set(3)
            assert group.master() == 1
            topic = "partitioned"
            create_topic(group, topic, partitions=1)
            client = make_client("kafka-python", group.bootstrap)
            before = [Message(f"before-{i}".encode(), partition=0) for i in range(50)]
            client.produce(topic, before)
            isolated = WireClient(group.address(1))  # a client that still reaches the old master
            assert produce_all(isolated, topic, b"ok-before-the-cut") == ErrorCode.NONE

            to_zookeeper.cut()
            to_followers.cut()
            cut_at = time.monotonic()
            answers = []
            while time.monotonic() - cut_at < 12:
                answers.append(produce_all(isolated, topic, f"during-{len(answers)}".encode()))
            assert answers and ErrorCode.NONE not in answers, answers
            new = group.master(timeout=30, other_than=1)
            after = [Message(f"after-{i}".encode(), partition=0) for i in range(50)]
            make_client("kafka-python", ",".join(group.address(n) for n in (2, 3))).produce(topic, after)

            to_zookeeper.heal()
            to_followers.heal()
            assert sorted(group.wait_sync_state_set(3, timeout=90)) == [1, 2, 3]
            assert group.master() == new
            values = [r.value for r in read_all(group, topic, partitions=1)[0]]
            expected = [m.value for m in before] + [b"ok-before-the-cut"] + [m.value for m in after]
            assert values == expected
            assert "truncating the commitlog" in group.nodes[1].log()
            isolated.close()
        finally:
            group.stop()
