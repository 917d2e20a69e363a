"""Admin operations and their error paths: create with configs, describe configs, create
partitions, delete, duplicate topic, invalid names."""

from __future__ import annotations

import pytest

from compat_tests.clients import ClientError, Message
from compat_tests.conftest import eventually, wait_for_partitions, wait_on_every_node


def test_create_topic_with_configs_then_describe_them(client, reference, name):
    client.create_topic(name, 3, {"retention.ms": "3600000", "cleanup.policy": "delete"})
    wait_for_partitions(reference, name, 3)
    configs = eventually(lambda: client.topic_configs(name), lambda c: "retention.ms" in c)  # any node knows it
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "delete"
    # the reference client may ask a node that has not learnt the topic yet either (a cluster)
    theirs = eventually(lambda: reference.topic_configs(name), lambda c: "max.message.bytes" in c)
    assert configs["max.message.bytes"] == theirs["max.message.bytes"]


def test_create_partitions_then_produce_to_a_new_one(client, new_topic, reference, target):
    topic = new_topic(1)
    client.create_partitions(topic, 3)
    wait_for_partitions(client, topic, 3)
    # the reference producer may ask a node that has not learnt the new partitions yet (a cluster)
    wait_on_every_node(target, reference, topic, 3)
    reference.produce(topic, [Message(b"new", partition=2)])
    assert [(r.partition, r.offset) for r in reference.consume(topic, [2], "earliest")] == [(2, 0)]


def test_delete_topic_removes_it(client, new_topic, reference):
    topic = new_topic()
    client.delete_topic(topic)
    # every node of a cluster forgets it, not all at the same moment
    assert topic not in eventually(reference.list_topics, lambda topics: topic not in topics)
    assert topic not in eventually(client.list_topics, lambda topics: topic not in topics)


def test_creating_an_existing_topic_fails_with_topic_already_exists(client, new_topic):
    topic = new_topic()
    with pytest.raises(ClientError) as e:
        client.create_topic(topic, 1)
    assert e.value.code == "TOPIC_ALREADY_EXISTS"


@pytest.mark.parametrize("bad", ["has space", "slash/name", "..", "x" * 250], ids=["space", "slash", "dotdot", "250-chars"])
def test_invalid_topic_name_is_refused(client, reference, bad):
    with pytest.raises(ClientError) as e:
        client.create_topic(bad, 1)
    assert e.value.code == "INVALID_TOPIC_EXCEPTION"
    assert bad not in reference.list_topics()
