"""A producer's retry is deduplicated across a broker restart, clean or SIGKILL,
and producer ids stay unique."""

import signal

import pytest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.kit.wire import fetch
from tests.kit.wire import create_by_metadata as create
from tests.kit.wire import produce_batch as produce
from tests.kit.wire import WireClient


def idempotent_batch(pid: int, seq: int, n: int = 5) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=0, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v%d" % (seq + i), headers=[])
    return bytes(b.build())


def init_pid(client) -> int:
    return client.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1)).producer_id


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "sigkill"])
def test_retry_after_restart_is_answered_with_the_original_offset(fresh_broker, topic_name, stop_signal):
    broker = fresh_broker(**{"flush.mode": "sync"})
    client = WireClient(broker.bootstrap)
    create(client, topic_name)
    pid = init_pid(client)
    first = idempotent_batch(pid, 0)
    assert produce(client, topic_name, first, acks=-1).base_offset == 0
    assert produce(client, topic_name, idempotent_batch(pid, 5), acks=-1).base_offset == 5
    client.close()
    broker.stop(sig=stop_signal)
    broker.start()
    client = WireClient(broker.bootstrap)
    retry = produce(client, topic_name, first, acks=-1)
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert produce(client, topic_name, idempotent_batch(pid, 20), acks=-1).error_code == 45
    assert produce(client, topic_name, idempotent_batch(pid, 10), acks=-1).base_offset == 10
    assert fetch(client, topic_name, 0).high_watermark == 15
    assert init_pid(client) != pid
