"""confluent-kafka (librdkafka) against a live Gregor, with every codec."""

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test dependency")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.clients


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_produce_and_assign_consume_with_codec(bootstrap, topic_name, codec):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])[topic_name].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "compression.type": codec, "linger.ms": 5})
    delivered = []
    for i in range(200):
        producer.produce(topic_name, key=b"k%d" % (i % 7), value=b"v%d" % i, headers=[("n", b"%d" % i)],
                         on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(15) == 0
    assert all(err is None for err, _, _ in delivered) and len(delivered) == 200
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(2)])
    got = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers()))
        if len(got) == 200:
            break
    consumer.close()
    assert len(got) == 200
    assert sorted(v for _, _, _, v, _ in got) == sorted(b"v%d" % i for i in range(200))
    by_key = {}
    for partition, _, key, _, _ in got:
        by_key.setdefault(key, set()).add(partition)
    assert all(len(parts) == 1 for parts in by_key.values())


def test_offsets_for_times_and_watermarks(bootstrap, topic_name):
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic_name, value=b"x", timestamp=2_000_000 + i)
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
    assert (low, high) == (0, 5)
    [found] = consumer.offsets_for_times([TopicPartition(topic_name, 0, 2_000_003)], timeout=10)
    assert found.offset == 3
    consumer.close()
