"""Large produce batches go from the socket into a pipe and from it into the commitlog with
splice(2) (broker/net/splice.py, store/piped.py): the records read back as sent, a batch whose CRC
fails is refused as Kafka refuses it and leaves nothing, a client that sends half a request holds
up no one, and a pipe that fills first hands its bytes back to the buffered way."""

from __future__ import annotations

import fcntl
import re
import shutil
import socket
import threading
import time
import urllib.request

import pytest
import trio
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker.net.metrics import BrokerMetrics
from broker.net.receive_timer import ReceiveTimer
from broker.net.splice import ProduceSplicer
from protocol.errors import ErrorCode
from tests.kit.gregor import TEST_SEGMENT_BYTES, BrokerProcess
from tests.kit.wire import WireClient, create_topic, fetch

BIG = 200  # records of 1 KiB per batch: ~200 KiB, above produce.splice.min.bytes (64 KiB)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("splice") / "data",
                      {"commitlog.segment.bytes": str(max(int(TEST_SEGMENT_BYTES), 64 << 20))},
                      extra_args=["--admin-port", "0"])
    b.start()
    yield b
    b.stop()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def spliced(broker) -> tuple[int, int]:
    """(batches received into a pipe, of them completed in a buffer) so far."""
    with urllib.request.urlopen(f"http://{broker.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    batches = re.search(r"^gregor_produce_spliced_batches_total (\S+)$", text, re.MULTILINE)
    spills = re.search(r"^gregor_produce_splice_spills_total (\S+)$", text, re.MULTILINE)
    return int(float(batches.group(1))), int(float(spills.group(1)))


def big_batch(tag: int, corrupt: bool = False, producer_id: int = -1, sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
                                        batch_size=1 << 30)
    for i in range(BIG):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=bytes([tag % 256]) * 1000 + b"%d" % i,
                       headers=[])
    out = bytearray(builder.build())
    if corrupt:
        out[-5] ^= 0xFF
    return bytes(out)


def produce_frame(topic: str, records: bytes, version: int, correlation_id: int = 1) -> bytes:
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest[version](transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])
    request.with_header(correlation_id=correlation_id, client_id="splice-test")
    return bytes(request.encode(header=True, framed=True))


def produce(client: WireClient, topic: str, records: bytes, version: int):
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest[version](transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])
    return client.request(request).responses[0].partition_responses[0]


def values(client: WireClient, topic: str, offset: int) -> list[bytes]:
    out = []
    while True:
        part = fetch(client, topic, offset)
        if not part.records:
            return out
        got = MemoryRecords(part.records)
        while (batch := got.next_batch()) is not None:
            for record in batch:
                out.append(record.value)
                offset = record.offset + 1


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_large_batches_are_spliced_and_read_back_as_sent(broker, version):
    client = WireClient(broker.bootstrap)
    topic, _, _ = create_topic(client)
    before = spliced(broker)[0]
    batches = [big_batch(tag) for tag in range(4)]
    # the first large Produce turns the connection's peeking on; the ones after it are spliced
    answers = [produce(client, topic, b, version) for b in batches]
    assert [(a.error_code, a.base_offset) for a in answers] == [(0, i * BIG) for i in range(4)]
    assert spliced(broker)[0] - before == 3
    expected = [r.value for b in batches for r in MemoryRecords(b).next_batch()]
    assert values(client, topic, 0) == expected
    # a small request on the same connection is read as before, whole
    assert produce(client, topic, _small(), version).error_code == 0
    assert spliced(broker)[0] - before == 3
    client.close()


def _small() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1, key=None, value=b"small", headers=[])
    return bytes(builder.build())


def test_a_spliced_batch_whose_crc_fails_is_refused_and_the_connection_goes_on(broker):
    client = WireClient(broker.bootstrap)
    topic, _, _ = create_topic(client)
    assert produce(client, topic, big_batch(1), 9).error_code == 0
    before = spliced(broker)[0]
    refused = produce(client, topic, big_batch(2, corrupt=True), 9)
    assert (refused.error_code, refused.base_offset, refused.log_start_offset) == (ErrorCode.CORRUPT_MESSAGE, -1, -1)
    assert spliced(broker)[0] - before == 1  # it was spliced, and refused from the page cache
    after = produce(client, topic, big_batch(3), 9)
    assert (after.error_code, after.base_offset) == (0, BIG)
    got = values(client, topic, 0)
    assert len(got) == 2 * BIG and got[BIG][:3] == b"\x03\x03\x03"
    client.close()


def test_a_duplicate_whose_crc_fails_is_corrupt_not_a_duplicate(broker):
    """Kafka checks the CRC before the producer's sequence: a resent batch that arrives damaged
    is CORRUPT_MESSAGE, though its header says it is a duplicate."""
    client = WireClient(broker.bootstrap)
    topic, _, _ = create_topic(client)
    pid = client.request(InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=60000)).producer_id
    assert produce(client, topic, big_batch(1, producer_id=pid, sequence=0), 9).error_code == 0
    ok = produce(client, topic, big_batch(1, producer_id=pid, sequence=0), 9)
    assert (ok.error_code, ok.base_offset) == (0, 0)  # the duplicate, answered with its first offset
    bad = produce(client, topic, big_batch(1, corrupt=True, producer_id=pid, sequence=0), 9)
    assert bad.error_code == ErrorCode.CORRUPT_MESSAGE
    assert len(values(client, topic, 0)) == BIG
    client.close()


def test_a_client_that_sends_half_a_request_holds_up_no_one(broker):
    slow, other = WireClient(broker.bootstrap, timeout=30), WireClient(broker.bootstrap, timeout=30)
    topic, _, _ = create_topic(other)
    assert produce(slow, topic, big_batch(1), 9).error_code == 0  # peeking on
    frame = produce_frame(topic, big_batch(2), 9, correlation_id=77)
    slow.send_raw(frame[:len(frame) // 2])  # then nothing for a while
    time.sleep(0.3)
    for tag in range(3, 6):  # another connection's large batches are spliced and answered meanwhile
        assert produce(other, topic, big_batch(tag), 9).error_code == 0
    slow.send_raw(frame[len(frame) // 2:])
    answer = slow.receive_frame()
    assert answer is not None and int.from_bytes(answer[:4], "big") == 77
    got = values(other, topic, 0)
    assert [v[0] for v in got[::BIG]] == [1, 3, 4, 5, 2]
    slow.close()
    other.close()


def test_a_pipe_that_fills_first_hands_the_frame_back_whole():
    """The pipe holds what the socket's pages held, not what its size says: a batch that does
    not fit is read out of it, the rest from the socket, and the frame handed back as bytes."""
    frame = produce_frame("t", big_batch(7), 9)
    metrics = BrokerMetrics()

    async def main():
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        sender = socket.create_connection(listener.getsockname())
        server, _ = await listener.accept()
        splicer = ProduceSplicer(server.fileno(), 65536, 1 << 27, metrics)
        splicer.consider(frame[4:])
        assert splicer.active
        fcntl.fcntl(splicer.write_fd, fcntl.F_SETPIPE_SZ, 4096)  # one page, though it says 1 MiB
        threading.Thread(target=sender.sendall, args=(frame,), daemon=True).start()
        timer = ReceiveTimer(60, 60)
        got = await splicer.receive(timer, 60)
        splicer.close()
        sender.close()
        server.close()
        listener.close()
        return got

    got = trio.run(main)
    assert isinstance(got, bytes) and got == frame[4:]
    assert (metrics.spliced_batches, metrics.splice_spills) == (1, 1)


def test_requests_of_several_partitions_take_the_buffered_way(broker):
    """The Java client's and kafka-python's shape: such a connection never starts peeking."""
    client = WireClient(broker.bootstrap)
    topic, _, _ = create_topic(client, partitions=2)
    before = spliced(broker)[0]
    T = ProduceRequest.TopicProduceData
    for round_ in range(3):
        request = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
            T(name=topic, partition_data=[T.PartitionProduceData(index=p, records=big_batch(round_)) for p in (0, 1)])])
        answers = client.request(request).responses[0].partition_responses
        assert [(a.error_code, a.base_offset) for a in answers] == [(0, round_ * BIG)] * 2
    assert spliced(broker)[0] == before
    assert len(values(client, topic, 0)) == 3 * BIG
    client.close()


def test_a_spliced_batch_over_the_topics_limit_is_message_too_large(broker):
    """A header check that fails reads the batch out of the pipe and checks it whole, in Kafka's
    order: here MESSAGE_TOO_LARGE, and the connection goes on."""
    client = WireClient(broker.bootstrap)
    topic, error, _ = create_topic(client, {"max.message.bytes": "100000"})
    assert error == 0
    big = big_batch(1)  # ~200 KiB
    before = spliced(broker)[0]
    answers = [produce(client, topic, big, 9) for _ in range(3)]  # the first turns peeking on
    assert [a.error_code for a in answers] == [ErrorCode.MESSAGE_TOO_LARGE] * 3
    assert spliced(broker)[0] - before == 2
    assert produce(client, topic, _small(), 9).error_code == 0
    assert values(client, topic, 0) == [b"small"]
    client.close()
