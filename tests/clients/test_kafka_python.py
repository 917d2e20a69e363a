"""kafka-python 3.x against a live Gregor: default (idempotent) producer,
consumer by assign, admin create/describe/delete."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

pytestmark = pytest.mark.clients


def _admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def test_default_producer_is_idempotent_and_round_trips_keys_values_headers(bootstrap, topic_name):
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(topic_name, 3, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    assert producer.config["enable_idempotence"]
    sent = []
    for i in range(300):
        fut = producer.send(topic_name, key=b"key-%d" % i, value=b"value-%d" % i, headers=[("h", b"%d" % i)])
        sent.append(fut)
    producer.flush()
    metas = [f.get(timeout=10) for f in sent]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    parts = [TopicPartition(topic_name, p) for p in range(3)]
    consumer.assign(parts)
    consumer.seek_to_beginning()
    got = {(r.partition, r.offset): r for r in consumer}
    consumer.close()
    admin.close()
    assert len(got) == 300
    for i, meta in enumerate(metas):
        record = got[(meta.partition, meta.offset)]
        assert (record.key, record.value, record.headers) == (b"key-%d" % i, b"value-%d" % i, [("h", b"%d" % i)])
    for p in range(3):
        offsets = sorted(o for (part, o) in got if part == p)
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(bootstrap, topic_name, codec):
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
    for i in range(50):
        producer.send(topic_name, value=b"payload-%d " % i * 20)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(topic_name, 0)])
    values = [r.value for r in consumer]
    consumer.close()
    assert values == [b"payload-%d " % i * 20 for i in range(50)]


def test_offsets_for_times_and_end_offsets(bootstrap, topic_name):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        producer.send(topic_name, value=b"x", timestamp_ms=1_000_000 + i * 10)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = TopicPartition(topic_name, 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 10
    found = consumer.offsets_for_times({tp: 1_000_045})[tp]
    assert (found.offset, found.timestamp) == (5, 1_000_050)
    assert consumer.offsets_for_times({tp: 9_000_000})[tp] is None
    consumer.close()


def test_admin_create_describe_partitions_delete(bootstrap, topic_name):
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "3600000"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
    text = repr(configs)
    assert "retention.ms" in text and "3600000" in text
    admin.create_partitions({topic_name: NewPartitions(5)})
    described = admin.describe_topics([topic_name])
    assert len(described[0]["partitions"]) == 5
    admin.delete_topics([topic_name])
    assert topic_name not in admin.list_topics()
    admin.close()
