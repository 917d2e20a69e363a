"""Idempotent-producer sequence rules, as recorded from Kafka 3.9
(kafka-reference 05_idempotent_produce_sequences)."""

from broker.txn.producers import ProducerStateTable, Verdict
from protocol.errors import ErrorCode
from protocol.record_batch import BatchHeader

BASE = BatchHeader(base_offset=0, batch_length=100, partition_leader_epoch=-1, magic=2, crc=0, attributes=0,
                   last_offset_delta=4, base_timestamp=0, max_timestamp=4, producer_id=7, producer_epoch=0,
                   base_sequence=0, record_count=5)


def batch(seq: int, epoch: int = 0, pid: int = 7) -> BatchHeader:
    return BASE._replace(base_sequence=seq, producer_epoch=epoch, producer_id=pid)


def appended(table: ProducerStateTable, header: BatchHeader, offset: int) -> None:
    assert table.check("t", 0, header).verdict is Verdict.APPEND
    table.record("t", 0, header, offset)


def test_recorded_kafka_sequence_scenario(tmp_path):
    table = ProducerStateTable(None)
    appended(table, batch(0), 0)
    appended(table, batch(5), 5)
    dup = table.check("t", 0, batch(0))
    assert dup.verdict is Verdict.DUPLICATE and dup.duplicate_of.base_offset == 0
    assert table.check("t", 0, batch(20)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(table, batch(10), 10)
    appended(table, batch(0, epoch=1), 15)
    assert table.check("t", 0, batch(15, epoch=0)).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.check("t", 0, batch(3, epoch=1)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert table.check("t", 0, batch(0, epoch=1)).duplicate_of.base_offset == 15


def test_unknown_producer_accepts_any_sequence_then_must_continue(tmp_path):
    table = ProducerStateTable(None)
    appended(table, batch(7, pid=99), 20)
    appended(table, batch(12, pid=99), 25)
    assert table.check("t", 0, batch(0, pid=99)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_only_the_last_five_batches_are_deduplicated(tmp_path):
    table = ProducerStateTable(None)
    for i in range(6):
        appended(table, batch(i * 5), i * 5)
    assert table.check("t", 0, batch(5)).verdict is Verdict.DUPLICATE
    assert table.check("t", 0, batch(0)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_wraps_at_int32_max(tmp_path):
    table = ProducerStateTable(None)
    appended(table, batch(2**31 - 5)._replace(last_offset_delta=4), 0)
    assert table.check("t", 0, batch(0)).verdict is Verdict.APPEND


def test_non_idempotent_batches_are_never_checked(tmp_path):
    table = ProducerStateTable(None)
    assert table.check("t", 0, batch(-1, epoch=-1, pid=-1)).verdict is Verdict.APPEND


def test_producer_ids_stay_unique_across_restarts_and_crashes(tmp_path):
    """Blocks of ids are reserved by a record of the commitlog's state topic before use."""
    from store import Store
    from tests.store.conftest import tiny_config
    store = Store.open(tmp_path / "data", tiny_config())
    first = ProducerStateTable(store)
    ids = {first.allocate_producer_id() for _ in range(1500)}
    store.close()
    (tmp_path / "data" / "clean_shutdown").unlink()  # as if the process had died
    store = Store.open(tmp_path / "data", tiny_config())
    second = ProducerStateTable(store)
    later = {second.allocate_producer_id() for _ in range(10)}
    store.close()
    assert len(ids) == 1500 and not ids & later
    assert not (tmp_path / "data" / "producer_ids").exists()


def test_a_follower_made_master_knows_batches_above_its_high_watermark(tmp_path):
    """A follower holds batches its master shipped before the sync-state set acknowledged them
    (it learns the high watermark with the next chunk). Made master, it must count them in its
    producer state: a producer retrying such a batch after the failover gets it as a duplicate,
    not appended twice (tests/cluster/test_failover.py caught kcat's retry stored twice)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from broker.txn.producers import restore
    from protocol.record_batch import parse_header
    from tests.store.replicas import make, ship

    leader, follower = make(tmp_path / "leader"), make(tmp_path / "follower", follower=True)
    try:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=7,
                                            producer_epoch=0, base_sequence=0, batch_size=2**20)
        builder.append(0, timestamp=1_000, key=None, value=b"x", headers=[])
        idempotent = bytes(builder.build())
        leader.append("orders", 0, idempotent, parse_header(idempotent))
        follower.replicate(following=True)
        ship(leader, follower)
        assert follower.high_watermark("orders", 0) == 0  # not acknowledged by the set yet
        assert follower.log_end_offset("orders", 0) == 1
        table = ProducerStateTable(follower)
        assert restore(table, follower) == 1
        again = table.check("orders", 0, parse_header(idempotent))
        assert again.verdict is Verdict.DUPLICATE and again.duplicate_of.base_offset == 0
    finally:
        leader.close()
        follower.close()
