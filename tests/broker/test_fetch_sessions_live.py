"""Fetch v13-v18 (topic ids) and incremental fetch sessions (KIP-227) on the wire, against Gregor
and a real Apache Kafka 4.4.0 with the same raw requests and the same expected answers."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.consumer import FetchRequest

from protocol.errors import ErrorCode
from tests.kit.both import GREGOR, KAFKA, connect, started
from tests.kit.wire import WireClient, batch, produce_batch, wait_for_leaders

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]
ALL = 1 << 20


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def client(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), {"auto.create.topics.enable": "false"},
                 in_process=True, kafka_version=KAFKA_4) as b:
        c = connect(b)
        yield c
        c.close()


def create(client: WireClient, partitions: int = 2, name: str | None = None) -> tuple[str, uuid.UUID]:
    """A new topic: (name, topic id)."""
    name = name or f"fs-{uuid.uuid4().hex[:8]}"
    T = CreateTopicsRequest.CreatableTopic
    deadline = time.monotonic() + 15
    while True:  # Kafka may still be deleting a topic of that name
        r = client.request(CreateTopicsRequest[7](topics=[T(name=name, num_partitions=partitions, replication_factor=1,
                                                            assignments=[], configs=[])],
                                                  timeout_ms=15000, validate_only=False))
        if r.topics[0].error_code != ErrorCode.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.topics[0].error_code == 0, r
    wait_for_leaders(client, name)
    deadline = time.monotonic() + 15
    while True:  # Kafka's broker takes its partitions a moment after Metadata names their leader
        answer = fetch(client, 12, [(name, p, 0) for p in range(partitions)])
        if all(p.error_code == 0 for t in answer.responses for p in t.partitions) or time.monotonic() > deadline:
            return name, r.topics[0].topic_id
        time.sleep(0.1)


def fetch(client: WireClient, version: int, parts: list[tuple[object, int, int]], session_id: int = 0,
          epoch: int = -1, forgotten: list[tuple[object, int]] = (), max_wait_ms: int = 0):
    """Fetch `version` of `parts` as (topic name or id, partition, fetch offset)."""
    F = FetchRequest.FetchTopic
    key = "topic_id" if version >= 13 else "topic"
    topics: list = []
    for ref, partition, offset in parts:
        if not topics or getattr(topics[-1], key) != ref:
            topics.append(F(**{key: ref}, partitions=[]))
        topics[-1].partitions.append(F.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                      fetch_offset=offset, last_fetched_epoch=-1,
                                                      log_start_offset=-1, partition_max_bytes=ALL))
    G = FetchRequest.ForgottenTopic
    gone = [G(**{key: ref}, partitions=[p]) for ref, p in forgotten]
    return client.request(FetchRequest[version](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=ALL, isolation_level=0, session_id=session_id,
        session_epoch=epoch, topics=topics, forgotten_topics_data=gone, rack_id=""))


def summary(response, version: int):
    """(error, [(topic, partition, error, high watermark, record bytes)]) of an answer."""
    key = "topic_id" if version >= 13 else "topic"
    return response.error_code, [(getattr(t, key), p.partition_index, p.error_code, p.high_watermark,
                                  len(p.records or b"")) for t in response.responses for p in t.partitions]


@pytest.mark.parametrize("version", [13, 15, 16, 17, 18])
def test_fetch_by_topic_id_reads_the_topic_and_an_unknown_id_is_unknown_topic_id(client, version):
    name, topic_id = create(client)
    assert produce_batch(client, name, batch(3)).error_code == 0
    stranger = uuid.uuid4()
    error, parts = summary(fetch(client, version, [(topic_id, 0, 0), (stranger, 0, 0), (topic_id, 1, 0)]), version)
    assert error == 0
    assert [(t, p, e, hw) for t, p, e, hw, _ in parts] == [
        (topic_id, 0, 0, 3), (topic_id, 1, 0, 0), (stranger, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1)]
    assert parts[0][4] > 0 and parts[1][4] == 0
    zero = summary(fetch(client, version, [(uuid.UUID(int=0), 0, 0)]), version)  # read back as None
    assert zero == (0, [(None, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1, 0)])


def test_partitions_that_cannot_be_read_are_answered_after_those_read(client):
    name, _ = create(client)
    assert produce_batch(client, name, batch(2)).error_code == 0
    _, parts = summary(fetch(client, 12, [(name, 9, 0), ("no-such-topic", 0, 0), (name, 0, 0)]), 12)
    assert [(t, p, e) for t, p, e, _, _ in parts] == [
        (name, 0, 0), (name, 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_a_partition_that_cannot_be_read_does_not_end_the_wait_for_one_that_can(client):
    name, _ = create(client)
    started_at = time.monotonic()
    _, parts = summary(fetch(client, 12, [(name, 0, 0), (name, 9, 0)], max_wait_ms=600), 12)
    assert time.monotonic() - started_at >= 0.5
    assert [(p, e) for _, p, e, _, _ in parts] == [(0, 0), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


@pytest.mark.parametrize("version", [12, 18])
def test_an_incremental_fetch_answers_only_partitions_with_news(client, version):
    name, topic_id = create(client)
    ref = topic_id if version >= 13 else name
    opened = fetch(client, version, [(ref, 0, 0), (ref, 1, 0)], session_id=0, epoch=0)
    session = opened.session_id
    assert session > 0 and summary(opened, version)[1] == [(ref, 0, 0, 0, 0), (ref, 1, 0, 0, 0)]
    quiet = fetch(client, version, [], session_id=session, epoch=1)
    assert (quiet.session_id, summary(quiet, version)) == (session, (0, []))
    assert produce_batch(client, name, batch(4), partition=1).error_code == 0
    news = fetch(client, version, [], session_id=session, epoch=2)
    _, parts = summary(news, version)
    assert [(t, p, e, hw) for t, p, e, hw, _ in parts] == [(ref, 1, 0, 4)] and parts[0][4] > 0
    # the client moves on: only the changed fetch offset is sent, and nothing new is answered
    moved = fetch(client, version, [(ref, 1, 4)], session_id=session, epoch=3)
    assert summary(moved, version) == (0, [])
    # forgetting partition 1 leaves partition 0, which has nothing new either
    assert summary(fetch(client, version, [], session_id=session, epoch=4, forgotten=[(ref, 1)]), version) == (0, [])
    assert produce_batch(client, name, batch(1), partition=1).error_code == 0
    assert summary(fetch(client, version, [], session_id=session, epoch=5), version) == (0, [])
    closed = fetch(client, version, [(ref, 0, 0)], session_id=session, epoch=-1)
    assert (closed.session_id, summary(closed, version)) == (0, (0, [(ref, 0, 0, 0, 0)]))
    gone = fetch(client, version, [], session_id=session, epoch=6)
    assert (gone.session_id, gone.error_code) == (0, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)


def test_session_errors_are_kafkas(client):
    name, _ = create(client)
    session = fetch(client, 12, [(name, 0, 0)], session_id=0, epoch=0).session_id
    assert session > 0
    wrong = fetch(client, 12, [], session_id=session, epoch=5)
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    by_id = fetch(client, 13, [], session_id=session, epoch=1)
    assert (by_id.error_code, by_id.session_id) == (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0)
    unknown = fetch(client, 12, [], session_id=2147483000, epoch=1)
    assert (unknown.error_code, unknown.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    # the errors left the session as it was: epoch 1 is still the one it waits for
    assert fetch(client, 12, [], session_id=session, epoch=1).error_code == 0


def test_forgetting_every_partition_closes_the_session(client):
    name, _ = create(client)
    session = fetch(client, 12, [(name, 0, 0)], session_id=0, epoch=0).session_id
    emptied = fetch(client, 12, [], session_id=session, epoch=1, forgotten=[(name, 0)])
    assert (emptied.error_code, emptied.session_id, emptied.responses) == (0, 0, [])
    assert fetch(client, 12, [], session_id=session, epoch=2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def delete(client: WireClient, name: str) -> None:
    r = client.request(DeleteTopicsRequest[6](topics=[DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=None)],
                                              timeout_ms=15000))
    assert r.responses[0].error_code == 0, r


def test_a_session_by_topic_id_answers_its_deleted_topic_unknown_and_refuses_one_made_again(client):
    name, topic_id = create(client, partitions=1)
    session = fetch(client, 17, [(topic_id, 0, 0)], session_id=0, epoch=0).session_id
    assert session > 0
    delete(client, name)
    epoch, deadline = 1, time.monotonic() + 15
    while True:  # Kafka's broker drops the topic a moment after DeleteTopics is answered
        gone = summary(fetch(client, 17, [], session_id=session, epoch=epoch), 17)
        epoch += 1
        if gone[1] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert gone == (0, [(topic_id, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, 0)])
    _, new_id = create(client, partitions=1, name=name)
    assert new_id != topic_id
    answer = fetch(client, 17, [], session_id=session, epoch=epoch)
    assert summary(answer, 17) == (0, [(topic_id, 0, ErrorCode.INCONSISTENT_TOPIC_ID, -1, 0)])
