"""Key and message-id lookups (`gregor query`, admin HTTP API) and /metrics on a live broker."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from tests.extensions.conftest import gregor_cli

pytestmark = pytest.mark.clients


def _keyed_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({name: {"num_partitions": 2, "replication_factor": 1,
                                "configs": {"key.index.enable": "true"}}})
    admin.close()


def _query(admin: str, *args: str) -> list[dict]:
    done = gregor_cli("query", "--admin", admin, *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_key_lookup_returns_the_32_newest_hits(admin_broker, topic_name):
    _keyed_topic(admin_broker.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=admin_broker.bootstrap)
    for i in range(60):  # one at a time, so store order is send order across both partitions
        producer.send(topic_name, key=b"order-7" if i % 3 == 0 or i >= 40 else b"other-%d" % i,
                      value=b"payload %d" % i, partition=i % 2).get(10)
    producer.close()
    hits = _query(admin_broker.admin, "--topic", topic_name, "--key", "order-7")
    sent = [i for i in range(60) if i % 3 == 0 or i >= 40]  # 34 records carry the key
    assert len(hits) == 32
    assert sorted(int(h["value"].split()[1]) for h in hits) == sent[-32:]
    assert [h["timestamp"] for h in hits] == sorted((h["timestamp"] for h in hits), reverse=True)
    assert all(h["key"] == "order-7" and h["topic"] == topic_name for h in hits)


def test_key_lookup_honours_the_time_range(admin_broker, topic_name):
    _keyed_topic(admin_broker.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=admin_broker.bootstrap)
    producer.send(topic_name, key=b"k", value=b"one").get(10)
    producer.close()
    assert len(_query(admin_broker.admin, "--topic", topic_name, "--key", "k", "--from", "2000-01-01T00:00:00Z")) == 1
    assert _query(admin_broker.admin, "--topic", topic_name, "--key", "k", "--to", "2000-01-01T00:00:00Z") == []


def test_a_message_id_round_trips_to_its_message(admin_broker, topic_name):
    _keyed_topic(admin_broker.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=admin_broker.bootstrap)
    sent = producer.send(topic_name, key=b"bin", value=b"\xff\x00binary", headers=[("h", b"text")],
                         partition=1).get(10)
    producer.close()
    (found,) = _query(admin_broker.admin, "--topic", topic_name, "--key", "bin")
    (again,) = _query(admin_broker.admin, "--msg-id", found["msg_id"])
    assert again == found
    assert (again["partition"], again["offset"]) == (1, sent.offset)
    assert (again["value"], again["value_encoding"]) == ("/wBiaW5hcnk=", "base64")
    assert again["headers"] == [{"key": "h", "value": "text", "encoding": "utf-8"}]
    consumer = KafkaConsumer(topic_name, bootstrap_servers=admin_broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    (record,) = [r for r in consumer if r.partition == 1]
    consumer.close()
    assert record.timestamp == again["timestamp"] and record.value == b"\xff\x00binary"


def test_an_unknown_message_id_is_reported_not_found(admin_broker):
    done = gregor_cli("query", "--admin", admin_broker.admin, "--msg-id", "0" * 32)
    assert done.returncode == 1 and "no message" in done.stderr


def test_metrics_report_requests_bytes_end_offsets_and_group_lag(admin_broker, topic_name):
    producer = KafkaProducer(bootstrap_servers=admin_broker.bootstrap)
    for i in range(5):
        producer.send(topic_name, b"m%d" % i, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=admin_broker.bootstrap, group_id=f"lag-{topic_name}",
                             auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=2)
    while not consumer.poll(timeout_ms=1000):
        pass
    consumer.commit()
    consumer.close()
    with urllib.request.urlopen(f"http://{admin_broker.admin}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    assert f'gregor_partition_end_offset{{partition="0",topic="{topic_name}"}} 5.0' in text
    assert f'gregor_group_lag{{group="lag-{topic_name}",partition="0",topic="{topic_name}"}} 3.0' in text
    assert 'gregor_requests_total{api="Produce"}' in text
    assert "gregor_request_bytes_total" in text and "gregor_response_bytes_total" in text
    assert "gregor_flush_wait_seconds_count" in text


def test_on_a_compacted_topic_a_key_lookup_finds_only_the_live_record(admin_broker, topic_name):
    """The log cleaner removes superseded records and relocates the kept ones (the key index
    then holds the original and the copy): a lookup answers the record consumers see, once, and
    its message id resolves. /metrics shows what the cleaner did."""
    admin = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap)
    admin.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1,
                                      "configs": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}}})
    admin.close()
    producer = KafkaProducer(bootstrap_servers=admin_broker.bootstrap, linger_ms=0)
    for value in (b"v1", b"v2"):  # each its own batch, with another key beside it
        producer.send(topic_name, key=b"user-9", value=value, partition=0)
        producer.send(topic_name, key=b"other", value=value, partition=0).get(10)
    producer.send(topic_name, key=b"user-9", value=b"v3", partition=0).get(10)
    producer.send(topic_name, key=b"last", value=b"x", partition=0).get(10)  # the last batch is never cleaned
    producer.close()
    deadline = time.monotonic() + 30
    while True:
        hits = _query(admin_broker.admin, "--topic", topic_name, "--key", "user-9")
        if len(hits) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert [(h["offset"], h["value"]) for h in hits] == [(4, "v3")]
    (by_id,) = _query(admin_broker.admin, "--msg-id", hits[0]["msg_id"])
    assert (by_id["offset"], by_id["value"]) == (4, "v3")
    with urllib.request.urlopen(f"http://{admin_broker.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    removed = next(float(line.split()[1]) for line in text.splitlines()
                   if line.startswith("gregor_log_cleaner_records_removed_total "))
    assert removed >= 3  # user-9's v1 and v2, and the first "other"


def test_a_key_given_in_bytes_that_are_not_utf8_is_looked_up_as_those_bytes(admin_broker, topic_name):
    _keyed_topic(admin_broker.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=admin_broker.bootstrap)
    producer.send(topic_name, key=b"\xff\xfeid", value=b"binary key").get(10)
    producer.close()
    (found,) = _query(admin_broker.admin, "--topic", topic_name, "--key", b"\xff\xfeid")  # as a shell passes it
    assert (found["key"], found["key_encoding"], found["value"]) == ("//5pZA==", "base64", "binary key")


def test_a_key_lookup_without_the_admin_address_is_a_usage_error(admin_broker, topic_name):
    done = gregor_cli("query", "--topic", topic_name, "--key", "k")
    assert done.returncode == 2 and done.stderr.startswith("gregor: lookups by --key or --msg-id need --admin")
