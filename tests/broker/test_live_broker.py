"""Produce/fetch behaviour on a live broker that the recordings do not cover:
long polling woken by appends, sync flush, restarts, auto-create off."""

import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.kit.wire import WireClient, batch, fetch
from tests.kit.wire import create_by_metadata as create
from tests.kit.wire import produce_batch as produce


def test_long_poll_returns_as_soon_as_a_record_arrives(gregor, topic_name):
    reader, writer = WireClient(gregor), WireClient(gregor)
    create(reader, topic_name)
    threading.Timer(0.3, lambda: produce(writer, topic_name, batch())).start()
    start = time.monotonic()
    part = fetch(reader, topic_name, 0, max_wait_ms=10_000)
    elapsed = time.monotonic() - start
    assert part.error_code == 0 and part.high_watermark == 3 and len(part.records) > 0
    assert 0.2 < elapsed < 5.0


def test_long_poll_with_nothing_arriving_waits_max_wait(gregor, topic_name):
    client = WireClient(gregor)
    create(client, topic_name)
    start = time.monotonic()
    part = fetch(client, topic_name, 0, max_wait_ms=400)
    assert part.records in (b"", None) and part.high_watermark == 0
    assert 0.35 < time.monotonic() - start < 3.0


def test_fetch_mid_batch_returns_the_whole_batch(gregor, topic_name):
    client = WireClient(gregor)
    create(client, topic_name)
    produce(client, topic_name, batch(5))
    produce(client, topic_name, batch(5))
    part = fetch(client, topic_name, 7)
    assert int.from_bytes(part.records[:8], "big") == 5  # the batch containing offset 7 starts at 5


def test_data_survives_clean_restart(fresh_broker, topic_name):
    broker = fresh_broker()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(100):
        producer.send(topic_name, value=b"m%d" % i)
    producer.flush()
    producer.close()
    assert broker.stop() == 0
    broker.start()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(topic_name, 0)])
    assert [r.value for r in consumer] == [b"m%d" % i for i in range(100)]
    consumer.close()


def test_sync_flush_mode_acknowledges_after_group_commit(fresh_broker, topic_name):
    broker = fresh_broker(**{"flush.mode": "sync"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [producer.send(topic_name, value=b"x" * 100) for _ in range(500)]
    producer.flush()
    offsets = sorted(f.get(timeout=10).offset for f in futures)
    producer.close()
    assert offsets == list(range(500))
    broker.stop(sig=9)  # SIGKILL: acknowledged data was fsynced
    broker.start()
    client = WireClient(broker.bootstrap)
    assert fetch(client, topic_name, 0).high_watermark == 500


def test_auto_create_off_leaves_unknown_topics_unknown(fresh_broker, topic_name):
    broker = fresh_broker(**{"auto.create.topics.enable": "false"})
    client = WireClient(broker.bootstrap)
    create(client, topic_name)
    create(client, topic_name)
    meta = client.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)],
                                              allow_auto_topic_creation=True,
                                              include_topic_authorized_operations=False))
    assert meta.topics[0].error_code == 3
    assert produce(client, topic_name, batch()).error_code == 3


def test_per_topic_max_message_bytes_refuses_larger_batches(gregor, topic_name):
    from kafka.protocol.admin import CreateTopicsRequest
    client = WireClient(gregor)
    T = CreateTopicsRequest.CreatableTopic
    client.request(CreateTopicsRequest[5](topics=[T(name=topic_name, num_partitions=1, replication_factor=1,
                                                    assignments=[], configs=[T.CreatableTopicConfig(
                                                        name="max.message.bytes", value="2000")])],
                                          timeout_ms=5000, validate_only=False))
    assert produce(client, topic_name, batch(1, value=b"x" * 3000)).error_code == 10
    assert produce(client, topic_name, batch(1, value=b"x" * 100)).error_code == 0
    assert fetch(client, topic_name, 0).high_watermark == 1


def zstd_batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=4, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(3):
        b.append(i, timestamp=1000 + i, key=None, value=b"zstd-value " * 50, headers=[])
    return bytes(b.build())


def test_zstd_needs_produce_v7_and_fetch_v10(gregor, topic_name):
    client = WireClient(gregor)
    create(client, topic_name)
    T = ProduceRequest.TopicProduceData
    old = ProduceRequest[6](acks=1, timeout_ms=5000, topic_data=[
        T(name=topic_name, partition_data=[T.PartitionProduceData(index=0, records=zstd_batch())])])
    assert client.request(old).responses[0].partition_responses[0].error_code == 76
    assert produce(client, topic_name, zstd_batch()).error_code == 0
    F = FetchRequest.FetchTopic
    old_fetch = FetchRequest[9](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                session_id=0, session_epoch=-1, topics=[F(topic=topic_name, partitions=[
                                    F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                     log_start_offset=-1, partition_max_bytes=1 << 20)])],
                                forgotten_topics_data=[])
    assert client.request(old_fetch).responses[0].partitions[0].error_code == 76
    assert len(fetch(client, topic_name, 0).records) > 0


def test_large_fetch_of_many_batches_arrives_whole_and_in_order(gregor, topic_name):
    """A fetch answer is written as one buffer per batch with writev: more batches than one
    writev takes (IOV_MAX) and more bytes than the socket buffer, so partial writes happen."""
    from kafka.record.memory_records import MemoryRecords

    from broker.net.socket_io import IOV_MAX
    client = WireClient(gregor)
    create(client, topic_name)
    count = 3 * IOV_MAX
    for i in range(count):
        assert produce(client, topic_name, batch(1, value=b"%06d" % i + b"." * 1000)).error_code == 0
    F = FetchRequest.FetchTopic
    req = FetchRequest[12](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1,
                           topics=[F(topic=topic_name, partitions=[F.FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=8 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    part = client.request(req).responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == count
    records = MemoryRecords(part.records)
    values = []
    while records.has_next():
        values.extend(r.value[:6] for r in records.next_batch())
    assert values == [b"%06d" % i for i in range(count)]


def test_a_produce_request_for_many_partitions_is_answered_per_partition_in_order(gregor, topic_name):
    """The handler appends a request's accepted batches with one store call; each partition
    still gets its own answer, in the request's order, and a refused one stops no other."""
    from kafka.protocol.admin import CreateTopicsRequest
    client = WireClient(gregor)
    C = CreateTopicsRequest.CreatableTopic
    client.request(CreateTopicsRequest[5](topics=[C(name=topic_name, num_partitions=4, replication_factor=1,
                                                    assignments=[], configs=[])],
                                          timeout_ms=5000, validate_only=False))
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    T = ProduceRequest.TopicProduceData
    sent = [(3, batch(2)), (9, batch(1)), (0, batch(3)), (1, bytes(corrupt)), (2, batch(1))]
    for _ in range(2):  # the second request's offsets follow the first's
        req = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            T(name=topic_name, partition_data=[T.PartitionProduceData(index=p, records=r) for p, r in sent])])
        answers = client.request(req).responses[0].partition_responses
        assert [a.index for a in answers] == [3, 9, 0, 1, 2]
        assert [a.error_code for a in answers] == [0, 3, 0, 2, 0]  # UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE
    assert [a.base_offset for a in answers] == [2, -1, 3, -1, 1]
    assert [fetch(client, topic_name, 0, partition=p).high_watermark for p in range(4)] == [6, 0, 2, 4]

