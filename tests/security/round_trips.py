"""Round trips through SASL and TLS listeners with kafka-python and confluent-kafka, and the wait on a login's answer."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.kit.wire import WireClient
from tests.security.sasl_wire import authenticate


VALUES = [b"value-%d" % i for i in range(10)]


def kafka_python_produce(address: str, topic: str, **config) -> None:
    producer = KafkaProducer(bootstrap_servers=address, **config)
    try:
        for value in VALUES:
            producer.send(topic, value)
        producer.flush(20)
    finally:
        producer.close()


def kafka_python_consume(address: str, topic: str, **config) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=address, **config)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < len(VALUES) and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
        return values
    finally:
        consumer.close()


def confluent_round_trip(config: dict, topic: str) -> list[bytes]:
    """VALUES produced with confluent-kafka under `config`, then what a consumer reads back."""
    confluent = pytest.importorskip("confluent_kafka")
    producer = confluent.Producer(config)
    for value in VALUES:
        producer.produce(topic, value)
    assert producer.flush(20) == 0
    consumer = confluent.Consumer({**config, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([confluent.TopicPartition(topic, 0, confluent.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < len(VALUES) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def _last_answer_within(address: str, mechanism: str, user: str, password: str, wanted: int, seconds: float):
    """Authenticate until the outcome is `wanted` (a credential change reaches the broker's cache
    through its metadata log, not at once on Kafka); the last answer."""
    deadline = time.monotonic() + seconds
    while True:
        client = WireClient(address)
        try:
            answer = authenticate(client, mechanism, user, password)[-1]
        finally:
            client.close()
        if answer.error_code == wanted or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)
