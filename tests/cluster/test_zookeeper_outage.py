"""ZooKeeper itself down under a running group (its own ZooKeeper, stopped for longer than the
nodes' session timeout and started again by the test): the master keeps appending acks=1 and
answers acks=all with REQUEST_TIMED_OUT, not success, since it cannot know whether it was
replaced; its high watermark waits too, so no consumer reads what the set may not hold. The
nodes stay up. Once ZooKeeper is back (the sessions expired meanwhile) a master claims the next
epoch and acknowledges acks=all again, and everything appended before and during the outage is
there, at its offset, on that master and on a follower elected after it."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest
from kafka.protocol.producer import ProduceRequest

from tests.kit.wire import fetch
from tests.kit.wire import WireClient
from tests.kit.group import BrokerGroup, wait_described
from tests.kit.zookeeper import ZOOKEEPER_JAR, ZooKeeperProcess
from tests.cluster.load import create_topic
from tests.durability.records import _batch, _read_values

pytestmark = [pytest.mark.crash]
REQUEST_TIMED_OUT = 7
RETRIABLE = {6, 7, 19, 20}  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND)
OUTAGE_S = 6  # longer than the nodes' session timeout (4 s)


def _produce(client: WireClient, topic: str, value: bytes, acks: int, timeout_ms: int = 5000):
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=_batch([value]))])])
    return client.request(request).responses[0].partition_responses[0]


def test_zookeeper_down_stops_acks_all_and_elections_and_loses_nothing(tmp_path):
    if not ZOOKEEPER_JAR.exists():
        pytest.skip("ZooKeeper is not installed (bin/setup-zookeeper: apt-get install zookeeper)")
    zk = ZooKeeperProcess(tmp_path / "zookeeper-data")
    zk.start()
    group = BrokerGroup(tmp_path, f"{zk.connect}/t-{uuid.uuid4().hex[:12]}", 3)
    try:
        group.start()
        master = group.master()
        topic = "zookeeper-outage"
        create_topic(group, topic, partitions=1)
        wait_described(group.bootstrap, topic, 1, whole_isr=True)
        client = WireClient(group.address(master), timeout=30)
        values = [b"before-%d" % i for i in range(5)]
        for i, value in enumerate(values):
            answer = _produce(client, topic, value, acks=-1)
            assert answer.error_code == 0 and answer.base_offset == i

        zk.stop()  # ZooKeeper goes away for everyone
        during = [b"during-%d" % i for i in range(3)]
        for value in during:  # acks=1: the master's append
            answer = _produce(client, topic, value, acks=1)
            assert answer.error_code == 0 and answer.base_offset == len(values), answer
            values.append(value)
        answer = _produce(client, topic, b"during-all", acks=-1, timeout_ms=2000)
        assert answer.error_code == REQUEST_TIMED_OUT, answer  # appended, not acknowledged
        values.append(b"during-all")
        assert fetch(client, topic, 0).high_watermark == 5  # consumers see no further meanwhile
        time.sleep(OUTAGE_S)  # time passing on purpose: an outage of a set length
        assert all(node.proc.poll() is None for node in group.nodes.values())

        zk.start()  # back, on the same port and data
        # the nodes' sessions expired meanwhile: they register again and a master claims the
        # next epoch; until then produce is refused (NOT_LEADER_OR_FOLLOWER) or times out
        client.close()
        deadline = time.monotonic() + 60
        for attempt in itertools.count():
            value = b"after-%d" % attempt
            try:
                master = group.master()
                client = WireClient(group.address(master), timeout=30)
                answer = _produce(client, topic, value, acks=-1, timeout_ms=2000)
            except (OSError, AssertionError):  # no master yet, or the connection closed under a change of role
                answer = None
            if answer is not None and answer.error_code == 0:
                break
            client.close()
            assert answer is None or answer.error_code in RETRIABLE, answer
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
        group.wait_sync_state_set(3)
        stored = _read_values(client, topic, 0, 0, answer.base_offset + 1)
        # everything appended before the outage and during it (acks=1; acks=all timed out) is
        # there, at its offset (the followers had it all: replication needs no ZooKeeper); what
        # was acknowledged after it too (attempts answered with an error may be there as well)
        assert stored[:len(values)] == values and stored[-1] == value
        client.close()
        values = stored

        group.kill(master)  # a follower holds it all too
        successor = group.master(other_than=master)
        wait_described(group.address(successor), topic, 1)
        client = WireClient(group.address(successor), timeout=30)
        deadline = time.monotonic() + 30
        while fetch(client, topic, 0).high_watermark < len(values):
            assert time.monotonic() < deadline, "the new master's high watermark never reached the log's end"
            time.sleep(0.2)
        assert _read_values(client, topic, 0, 0, len(values)) == values
        client.close()
    finally:
        group.stop()
        zk.stop()
