"""Produce then consume with the same client: keys, headers, nulls, empties, 1 MB, codecs,
the default partitioner, per-partition order."""

from __future__ import annotations

import pytest
from kafka.partitioner.default import murmur2

from compat_tests.clients import Message

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def test_keys_and_headers_round_trip(client, new_topic):
    topic = new_topic()
    headers = (("source", b"compat"), ("trace", b"abc-123"))
    sent = [Message(b"value-%d" % i, key=b"key-%d" % i, headers=headers) for i in range(20)]
    deliveries = client.produce(topic, sent)
    if deliveries is not None:
        assert [(d.partition, d.offset) for d in deliveries] == [(0, i) for i in range(20)]
    got = client.consume(topic, [0], "earliest")
    assert [(r.offset, r.key, r.value) for r in got] == [(i, m.key, m.value) for i, m in enumerate(sent)]
    assert all(r.headers == headers for r in got)


def test_null_and_empty_keys_and_values_round_trip(client, new_topic):
    topic = new_topic()
    sent = [Message(None, key=b"k-null-value"), Message(b"v-null-key", key=None),
            Message(b"", key=b"k-empty-value"), Message(b"v-empty-key", key=b"")]
    client.produce(topic, sent)
    got = client.consume(topic, [0], "earliest")
    assert [(r.offset, r.key, r.value) for r in got] == [(i, m.key, m.value) for i, m in enumerate(sent)]


def test_message_with_null_key_and_null_value_round_trips(client, new_topic):
    topic = new_topic()
    client.produce(topic, [Message(None, key=None), Message(b"after")])
    got = client.consume(topic, [0], "earliest")
    assert [(r.offset, r.key, r.value) for r in got] == [(0, None, None), (1, None, b"after")]


def test_one_megabyte_values_round_trip(client, new_topic):
    topic = new_topic()
    values = [bytes([ord("a") + i]) * 1_000_000 for i in range(3)]
    client.produce(topic, [Message(v) for v in values], max_request_bytes=2_000_000)
    got = client.consume(topic, [0], "earliest")
    assert [(r.offset, len(r.value), r.value[:1]) for r in got] == [(i, 1_000_000, v[:1]) for i, v in enumerate(values)]
    assert [r.value for r in got] == values


@pytest.mark.parametrize("codec", CODECS)
def test_codec_round_trip(client, new_topic, codec):
    topic = new_topic()
    sent = [Message(b"payload %d " % i * 20, key=b"k%d" % i) for i in range(100)]
    client.produce(topic, sent, codec=codec)
    got = client.consume(topic, [0], "earliest")
    assert [(r.offset, r.key, r.value) for r in got] == [(i, m.key, m.value) for i, m in enumerate(sent)]


def test_default_partitioner_puts_keys_where_murmur2_says(client, new_topic):
    """Java's and kafka-python's default for keyed messages is murmur2; librdkafka agrees with
    partitioner=murmur2_random. Every client must land each key on the same partition."""
    partitions = 5
    topic = new_topic(partitions)
    keys = [b"user-%d" % i for i in range(40)]
    client.produce(topic, [Message(b"v-" + k, key=k) for k in keys])
    got = client.consume(topic, list(range(partitions)), "earliest")
    assert sorted(r.key for r in got) == sorted(keys)
    expected = {k: (murmur2(k) & 0x7FFFFFFF) % partitions for k in keys}
    assert {r.key: r.partition for r in got} == expected


def test_per_partition_order_is_send_order(client, new_topic):
    partitions = 3
    topic = new_topic(partitions)
    sent = [Message(b"%d" % i, key=b"k", partition=i % partitions) for i in range(90)]
    client.produce(topic, sent)
    got = client.consume(topic, list(range(partitions)), "earliest")
    for p in range(partitions):
        mine = [r for r in got if r.partition == p]
        assert [r.offset for r in mine] == list(range(30))
        assert [int(r.value) for r in mine] == list(range(p, 90, partitions))
