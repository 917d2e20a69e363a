"""Produce error paths: an unknown topic with auto-creation off, a message above max.message.bytes."""

from __future__ import annotations

import pytest

from compat_tests.clients import ClientError, Message

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
