"""Producers and consumers of message format v0/v1 against Gregor and a real Apache Kafka 3.9.0,
with the same requests: raw Produce v0-v2 carrying magic 0/1 message sets (plain and wrapped in
gzip, snappy, lz4) read back as v2 batches, broken sets answered with Kafka's error codes,
Fetch v0-v3 down-converted, ListOffsets v0, message.format.version accepted and checked, and
kafka-python clients pinned to api_version (0, 8, 2) .. (0, 10, 1) both ways.

Both brokers meet the same expectations (measured on Kafka). Where the bytes may differ the
test compares what a consumer reads: Kafka pads a down-converted answer with a partial
message up to the size it read, which consumers skip; and a rebuilt batch that compression
would not shrink is stored uncompressed by Gregor, so compressed cases use compressible values.
"""

from __future__ import annotations

import struct
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tests.kit.wire import create_topic as create
from tests.kit.wire import describe_configs as describe
from tests.kit.wire import WireClient
from tests.kit.both import GREGOR, KAFKA, connect, started
from tests.protocol.message_sets import BAD_SETS, RECORDS, T0, message_set, read_set, restamped

SETTINGS = {"auto.create.topics.enable": "false"}
NONE, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, UNSUPPORTED_VERSION = 0, 6, 10, 32, 35
INVALID_CONFIG, UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD = 40, 76, 87
TOPIC = 2
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), SETTINGS, in_process=True) as process:
        yield process


@pytest.fixture
def client(broker):
    c = connect(broker)
    yield c
    c.close()


NOT_LEADER_OR_FOLLOWER = 6


def topic(client: WireClient, configs: dict[str, str] | None = None) -> str:
    # retention.ms=-1: records stamped T0 (2023) are past the default 7 days, and Kafka deletes
    # them at its retention check (every 5 minutes), whenever that falls during a test
    name, error, message = create(client, {"retention.ms": "-1", **(configs or {})})
    assert error == NONE, message
    return name


def produce(client: WireClient, version: int, name: str, records: bytes):
    """One Produce; NOT_LEADER_OR_FOLLOWER is retried for a few seconds, as clients retry it: Kafka's
    Metadata can name a new partition's leader a moment before that broker accepts appends."""
    P = ProduceRequest.TopicProduceData
    fields = {"transactional_id": None} if version >= 3 else {}
    deadline = time.monotonic() + 10
    while True:
        r = client.request(ProduceRequest[version](acks=1, timeout_ms=10000, topic_data=[P(name=name, partition_data=[
            P.PartitionProduceData(index=0, records=records)])], **fields))
        answer = r.responses[0].partition_responses[0]
        if answer.error_code != NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def fetch(client: WireClient, version: int, name: str, offset: int = 0, max_bytes: int = 1 << 20):
    F = FetchRequest.FetchTopic
    fields = {"max_bytes": max_bytes} if version >= 3 else {}
    r = client.request(FetchRequest[version](
        replica_id=-1, max_wait_ms=200, min_bytes=1, isolation_level=0, topics=[F(topic=name, partitions=[
            F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])], **fields))
    return r.responses[0].partitions[0]


def high_watermark(client: WireClient, name: str) -> int:
    """The partition's high watermark; Kafka may answer NOT_LEADER_OR_FOLLOWER for a moment after
    creating a topic, until its replica manager has the partition."""
    deadline = time.monotonic() + 10
    while (p := fetch(client, 4, name)).error_code == NOT_LEADER_OR_FOLLOWER and time.monotonic() < deadline:
        time.sleep(0.1)
    return p.high_watermark


def stored(client: WireClient, name: str) -> list[tuple[DefaultRecordBatch, list[tuple]]]:
    """The partition's batches as a v4 consumer gets them, each with (offset, timestamp, key, value)."""
    data = fetch(client, 4, name).records
    out, pos = [], 0
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        batch = DefaultRecordBatch(bytes(data[pos:pos + size]))
        out.append((batch, [(r.offset, r.timestamp, r.key, r.value) for r in batch]))
        pos += size
    return out


def v2_batch(count: int, codec_id: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec_id, False, -1, -1, -1, 1 << 30)
    for i in range(count):
        b.append(i, T0 + i, b"k%d" % i, b"v%d" % i * 40, [("h", b"dropped by down-conversion")])
    return bytes(b.build())


# -- Produce v0-v2 ------------------------------------------------------------------------

@pytest.mark.parametrize("codec_id", [0, 1, 2, 3], ids=["plain", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 0), (2, 1)])
def test_old_produce_appends_message_sets_as_v2_batches(client, version, magic, codec_id):
    name = topic(client)
    answers = [produce(client, version, name, message_set(magic, RECORDS, codec_id)) for _ in range(2)]
    assert [(a.error_code, a.base_offset) for a in answers] == [(NONE, 0), (NONE, 3)]
    if version == 2:
        assert answers[0].log_append_time_ms == -1
    batches = stored(client, name)
    timestamps = [-1] * 3 if magic == 0 else [T0, T0 + 1, T0 + 2]  # magic 0 has none: NO_TIMESTAMP
    assert [records for _, records in batches] == [
        [(base + i, timestamps[i], k, v) for i, (k, v) in enumerate(RECORDS)] for base in (0, 3)]
    assert [(b.magic, b.compression_type, b.producer_id) for b, _ in batches] == [(2, codec_id, -1)] * 2


@pytest.mark.parametrize("name", BAD_SETS)
def test_broken_message_sets_get_kafkas_error_and_append_nothing(client, name):
    records, code = BAD_SETS[name]
    t = topic(client)
    answer = produce(client, 2, t, records)
    assert (answer.error_code, answer.base_offset) == (code, -1)
    assert high_watermark(client, t) == 0


def test_a_partial_message_at_the_end_is_ignored(client):
    whole = message_set(1, RECORDS)
    name = topic(client)
    assert produce(client, 2, name, whole + whole[:20]).error_code == NONE
    assert len(stored(client, name)[0][1]) == 3


@pytest.mark.parametrize("version", [0, 1, 2])
def test_an_empty_message_set_appends_nothing_and_answers_offset_minus_1(client, version):
    name = topic(client)
    answer = produce(client, version, name, b"")
    assert (answer.error_code, answer.base_offset) == (NONE, -1)


def test_max_message_bytes_applies_to_each_message_and_to_the_rebuilt_batch(client):
    name = topic(client, {"max.message.bytes": "1000"})
    assert produce(client, 2, name, message_set(1, [(b"k", b"x" * 1200)])).error_code == MESSAGE_TOO_LARGE
    # each message is small, but together they rebuild into a batch above the limit
    assert produce(client, 2, name, message_set(1, [(b"k", b"x" * 40)] * 20)).error_code == MESSAGE_TOO_LARGE
    assert produce(client, 2, name, message_set(1, [(b"k", b"x" * 40)] * 5)).error_code == NONE


def test_a_log_append_time_topic_stamps_the_rebuilt_batch(client):
    name = topic(client, LOG_APPEND_TIME)
    answer = produce(client, 2, name, message_set(1, RECORDS, 1))
    assert answer.error_code == NONE and answer.log_append_time_ms > T0
    [(batch, records)] = stored(client, name)
    assert batch.timestamp_type == 1 and {r[1] for r in records} == {answer.log_append_time_ms}
    stamped = restamped(message_set(1, RECORDS[:1]), attributes=8)  # LogAppendTime is the broker's to set
    assert produce(client, 2, name, stamped).error_code == INVALID_TIMESTAMP


def test_a_compacted_topic_refuses_old_records_without_a_key(client):
    name = topic(client, {"cleanup.policy": "compact"})
    assert produce(client, 2, name, message_set(1, RECORDS, 1)).error_code == INVALID_RECORD
    assert produce(client, 0, name, message_set(0, [(b"k", b"v")])).error_code == NONE


def test_old_produce_versions_also_take_v2_batches_even_zstd(client):
    name = topic(client)
    assert produce(client, 2, name, v2_batch(2, codec_id=4)).base_offset == 0
    assert produce(client, 0, name, v2_batch(2)).base_offset == 2
    assert produce(client, 2, name, v2_batch(1) + v2_batch(1)).error_code == INVALID_RECORD


# -- Fetch v0-v3 --------------------------------------------------------------------------

def expected_sets(magic: int, codec_id: int, fetch_offset: int, appended: list[int] | None) -> list[tuple]:
    """What Kafka 3.9 sends for two stored batches of 3 and 2 records (`appended`: their
    LogAppendTime stamps): (offset, magic, attributes, timestamp, key, value, inner) per
    message, inner messages in the same shape."""
    type_bit = 8 if appended and magic == 1 else 0
    out = []
    for batch, (base, count) in enumerate(((0, 3), (3, 2))):
        stamps = [None if magic == 0 else appended[batch] if appended else T0 + i for i in range(count)]
        def message(offset: int, i: int, stamps=stamps) -> tuple:
            return offset, magic, type_bit, stamps[i], b"k%d" % i, b"v%d" % i * 40, []
        if not codec_id:
            out += [message(base + i, i) for i in range(count) if base + i >= fetch_offset]
        elif base + count > fetch_offset:
            inner = [message(base + i if magic == 0 else i, i) for i in range(count)]
            ts = None if magic == 0 else max(m[3] for m in inner)
            out.append((base + count - 1, magic, codec_id | type_bit, ts, None, None, inner))
    return out


def as_tuples(messages) -> list[tuple]:
    return [(m.offset, m.magic, m.attributes, m.timestamp, m.key, m.value, as_tuples(m.inner)) for m in messages]


@pytest.mark.parametrize("log_append_time", [False, True], ids=["create-time", "log-append-time"])
@pytest.mark.parametrize("codec_id", [0, 1, 2, 3], ids=["plain", "gzip", "snappy", "lz4"])
def test_fetch_v0_to_v3_down_converts_to_magic_0_and_1(client, codec_id, log_append_time):
    name = topic(client, LOG_APPEND_TIME if log_append_time else None)
    answers = [produce(client, 3, name, v2_batch(count, codec_id)) for count in (3, 2)]
    assert [a.error_code for a in answers] == [NONE, NONE]
    appended = [a.log_append_time_ms for a in answers] if log_append_time else None
    for version in range(4):
        for offset in (0, 1, 4):
            p = fetch(client, version, name, offset)
            assert (p.error_code, p.high_watermark) == (NONE, 5)
            messages = read_set(p.records)  # Kafka's padding, a partial message, is skipped
            assert all(m.crc_ok for m in messages)
            magic = 0 if version < 2 else 1
            assert as_tuples(messages) == expected_sets(magic, codec_id, offset, appended), (version, offset)


def test_fetch_v0_to_v3_stops_before_a_zstd_batch_and_refuses_one_first(client):
    name = topic(client)
    for batch in (v2_batch(2), v2_batch(2, codec_id=4), v2_batch(1)):
        assert produce(client, 7, name, batch).error_code == NONE
    assert [m.offset for m in read_set(fetch(client, 2, name, 0).records)] == [0, 1]
    refused = fetch(client, 2, name, 2)
    assert (refused.error_code, refused.high_watermark, refused.records) == (UNSUPPORTED_COMPRESSION_TYPE, -1, None)
    assert [m.offset for m in read_set(fetch(client, 3, name, 4).records)] == [4]


def test_down_conversion_can_be_switched_off_per_topic(client):
    name = topic(client, {"message.downconversion.enable": "false"})
    assert produce(client, 3, name, v2_batch(2)).error_code == NONE
    for version in range(4):
        p = fetch(client, version, name)
        assert (p.error_code, p.high_watermark, p.records) == (UNSUPPORTED_VERSION, -1, None)
    assert fetch(client, 4, name).high_watermark == 2


# -- ListOffsets v0 -----------------------------------------------------------------------

def test_list_offsets_v0_answers_old_style_offsets(client):
    name = topic(client)
    R = ListOffsetsRequest.ListOffsetsTopic

    def offsets(timestamp: int, most: int, partition: int = 0) -> tuple[int, list[int]]:
        r = client.request(ListOffsetsRequest[0](replica_id=-1, topics=[R(name=name, partitions=[
            R.ListOffsetsPartition(partition_index=partition, timestamp=timestamp, max_num_offsets=most)])]))
        p = r.topics[0].partitions[0]
        return p.error_code, p.old_style_offsets

    assert offsets(-1, 10) == (NONE, [0])  # an empty partition: its one segment starts at 0
    assert produce(client, 2, name, message_set(1, RECORDS)).error_code == NONE
    assert offsets(-1, 1) == (NONE, [3])
    assert offsets(-1, 10) == (NONE, [3, 0])
    assert offsets(-2, 10) == (NONE, [0])
    assert offsets(1500, 10) == (NONE, [])
    assert offsets(int(time.time() * 1000) + 60_000, 10) == (NONE, [3, 0])
    assert offsets(-1, 1, partition=5) == (3, [])


# -- message.format.version ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["0.10.0", "0.8.2", "2.8", "3.0-IV1", "0.10.0.1", "3.0.1", "4.0-IV1"])
def test_message_format_version_is_kept_and_ignored(client, value):
    name = topic(client, {"message.format.version": value})
    assert describe(client, name, "message.format.version") == {"message.format.version": (value, 1)}
    assert produce(client, 3, name, v2_batch(2)).error_code == NONE
    assert [b.magic for b, _ in stored(client, name)] == [2]  # every log is v2 since Kafka 3.0


@pytest.mark.parametrize("value", ["garbage", "", "4.0", "0.10", "0.9", "3.10", "3.9-IV9"])
def test_message_format_version_must_name_a_kafka_version(client, value):
    _, error, message = create(client, {"message.format.version": value})
    assert error == INVALID_CONFIG
    assert message == (f"Invalid value {value} for configuration message.format.version: "
                       f"Version {value} is not a valid version")


def test_message_format_version_can_be_altered(client):
    name = topic(client)
    A, I = AlterConfigsRequest, IncrementalAlterConfigsRequest
    for value, error in (("0.10.0", NONE), ("garbage", INVALID_CONFIG), ("2.1", NONE)):
        r = client.request(A[1](resources=[A.AlterConfigsResource(resource_type=TOPIC, resource_name=name, configs=[
            A.AlterConfigsResource.AlterableConfig(name="message.format.version", value=value)])], validate_only=False))
        assert r.responses[0].error_code == error
        r = client.request(I[1](resources=[I.AlterConfigsResource(resource_type=TOPIC, resource_name=name, configs=[
            I.AlterConfigsResource.AlterableConfig(name="message.format.version", config_operation=0, value=value)])],
            validate_only=False))
        assert r.responses[0].error_code == error
    assert describe(client, name, "message.format.version") == {"message.format.version": ("2.1", 1)}


# -- kafka-python pinned to old brokers ---------------------------------------------------

@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("api", [(0, 8, 2), (0, 9), (0, 10), (0, 10, 1)], ids=lambda v: ".".join(map(str, v)))
def test_old_kafka_python_clients_produce_and_consume(broker, client, api, compression):
    """(0, 8, 2): Produce v0 of magic 0; (0, 9): Produce v1 of magic 0; (0, 10)+: Produce v2 of
    magic 1. Consumers: Fetch v1 + ListOffsets v0 (0.9), Fetch v2 + ListOffsets v0 (0.10),
    Fetch v3 + ListOffsets v1 (0.10.1), and a current one."""
    name = topic(client)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api, compression_type=compression,
                             linger_ms=20)
    has_timestamps = api >= (0, 10)
    sent = [producer.send(name, key=b"k%d" % i, value=b"value %d " % i * 8,
                          timestamp_ms=T0 + i if has_timestamps else None) for i in range(20)]
    producer.flush()
    assert [f.get(10).offset for f in sent] == list(range(20))
    producer.close()
    for consumer_api in (None, (0, 9), (0, 10), (0, 10, 1)):
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=consumer_api,
                                 enable_auto_commit=False)
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, r.key, r.value, r.timestamp) for r in records]
        consumer.close()
        if consumer_api == (0, 9):
            stamps = [None] * 20  # magic 0 has no timestamps
        else:
            stamps = [T0 + i if has_timestamps else -1 for i in range(20)]
        assert got == [(i, b"k%d" % i, b"value %d " % i * 8, stamps[i]) for i in range(20)], consumer_api
