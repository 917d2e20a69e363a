"""Produce error paths: an unknown topic with auto-creation off, a message above max.message.bytes,
an acks=0 produce that fails."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import MetadataRequest

from compat_tests.clients import ClientError, Message
from compat_tests.conftest import eventually
from tests.kit.wire import WireClient, produce_request

# How each client reports a produce to a topic that does not exist: the broker's error, or the
# client's own timeout waiting for the topic's metadata (Java and kafka-python block on metadata).
UNKNOWN_TOPIC = {"UNKNOWN_TOPIC_OR_PARTITION", "TIMEOUT"}


def test_produce_to_unknown_topic_with_auto_create_off_fails_and_creates_nothing(client, target, reference, name):
    if target.auto_create is not False:
        pytest.skip(f"the broker reports auto.create.topics.enable={target.auto_create}; "
                    "this scenario needs it false")
    with pytest.raises(ClientError) as e:
        client.produce(name, [Message(b"x")])
    assert e.value.code in UNKNOWN_TOPIC
    assert name not in reference.list_topics()


def test_message_above_max_message_bytes_fails_with_message_too_large(client, new_topic, reference):
    """The client's own limit is raised so that the broker, not the client, refuses."""
    topic = new_topic()
    limit = int(reference.topic_configs(topic)["max.message.bytes"])
    with pytest.raises(ClientError) as e:
        client.produce(topic, [Message(b"x" * (limit + 1000))], max_request_bytes=limit * 2)
    assert e.value.code == "MESSAGE_TOO_LARGE"
    assert reference.list_offset(topic, 0, -1)[0] == 0


def test_an_acks_0_produce_that_fails_closes_the_connection(new_topic, bootstrap, reference):
    """acks=0 has no answer to carry an error, so the broker closes the connection instead: the
    client sees it close, refreshes its metadata and reconnects (to a new leader, say). One that
    succeeds keeps the connection."""
    topic = new_topic()
    probe = WireClient(bootstrap.split(",")[0])
    try:
        metadata = probe.request(MetadataRequest[1](topics=[topic]))
    finally:
        probe.close()
    nodes = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    leader = nodes[metadata.topics[0].partitions[0].leader_id]
    client = WireClient(leader)
    try:
        client.send(produce_request(topic, [b"kept"], acks=0))
        assert client.request(MetadataRequest[1](topics=[topic])).topics[0].error_code == 0  # still open
        client.send(produce_request(topic, [b"to a partition the topic lacks"], acks=0, partition=5))
        assert client.closed_by_peer(), "the connection stayed open after a failed acks=0 produce"
    finally:
        client.close()
    # the good record is there (on a cluster once the followers have it: the high watermark)
    assert eventually(lambda: reference.list_offset(topic, 0, -1)[0], lambda end: end == 1) == 1
