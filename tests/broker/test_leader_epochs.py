"""Leader epochs on the wire, against Gregor and a real Apache Kafka 3.9.0 with the same
requests: the epoch each stored batch carries, OffsetForLeaderEpoch's answers, and KIP-320's
fencing of a client whose current_leader_epoch differs from the leader's (issue 23, part C)."""

from __future__ import annotations

import struct
import time

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

from tests.kit.wire import wait_for_leaders
from tests.kit.wire import create_topic as create
from tests.kit.wire import WireClient
from tests.kit.both import GREGOR, KAFKA, connect, started

NONE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 0, 74, 75


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def client(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), {"auto.create.topics.enable": "false"},
                 in_process=True) as b:
        c = connect(b)
        yield c
        c.close()


def _produce(client: WireClient, topic: str, count: int) -> None:
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder
    for i in range(count):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        b.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v%d" % i, headers=[])
        T = ProduceRequest.TopicProduceData
        r = client.request(ProduceRequest[8](transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[T(
            name=topic, partition_data=[T.PartitionProduceData(index=0, records=bytes(b.build()))])]))
        assert r.responses[0].partition_responses[0].error_code == NONE


def _fetch(client: WireClient, topic: str, current_leader_epoch: int):
    F = FetchRequest.FetchTopic
    return client.request(FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[F(topic=topic, partitions=[F.FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")).responses[0].partitions[0]


def _end_offset(client: WireClient, topic: str, leader_epoch: int, current_leader_epoch: int = -1):
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    r = client.request(OffsetForLeaderEpochRequest[4](replica_id=-1, topics=[T(topic=topic, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=current_leader_epoch,
                                   leader_epoch=leader_epoch)])]))
    p = r.topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def _latest(client: WireClient, topic: str, current_leader_epoch: int):
    T = ListOffsetsRequest.ListOffsetsTopic
    r = client.request(ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=current_leader_epoch, timestamp=-1)])]))
    p = r.topics[0].partitions[0]
    return p.error_code, p.offset, p.leader_epoch


def test_batches_carry_the_leaders_epoch_and_offset_for_leader_epoch_answers_from_it(client):
    topic, error, _ = create(client)
    assert error == NONE
    wait_for_leaders(client, topic)
    _produce(client, topic, 3)
    part = _fetch(client, topic, 0)
    assert part.error_code == NONE and part.high_watermark == 3
    data = bytes(part.records)
    epochs = []
    while len(data) >= 61:
        (length,) = struct.unpack_from(">i", data, 8)
        epochs.append(struct.unpack_from(">i", data, 12)[0])
        data = data[12 + length:]
    assert epochs == [0, 0, 0]  # a new partition's first leader: epoch 0
    assert _end_offset(client, topic, 0) == (NONE, 0, 3)  # the latest epoch ends at the log end
    assert _end_offset(client, topic, 0, current_leader_epoch=0) == (NONE, 0, 3)
    assert _end_offset(client, topic, 1) == (NONE, -1, -1)  # an epoch newer than any the log knows
    assert _latest(client, topic, 0) == (NONE, 3, 0)


def test_a_client_with_another_leader_epoch_is_fenced_or_told_to_wait(client):
    topic, error, _ = create(client)
    assert error == NONE
    wait_for_leaders(client, topic)
    _produce(client, topic, 1)
    assert _fetch(client, topic, -1).error_code == NONE  # -1: no check
    assert _fetch(client, topic, 0).error_code == NONE
    assert _fetch(client, topic, 3).error_code == UNKNOWN_LEADER_EPOCH  # newer than the leader's
    assert _end_offset(client, topic, 0, current_leader_epoch=2)[0] == UNKNOWN_LEADER_EPOCH
    assert _latest(client, topic, 5)[0] == UNKNOWN_LEADER_EPOCH
