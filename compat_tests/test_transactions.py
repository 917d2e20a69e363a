"""Transactions (issue 19) as clients see them: a committed transaction is read once at either
isolation level; an aborted one never reaches read_committed readers (its offsets and the control
records skipped); an open one holds read_committed readers and ListOffsets at the last stable
offset; consume-transform-produce moves the group's offsets only on commit; a second producer
with the same transactional.id fences the first; and a transaction whose producer stopped dead
is aborted once transaction.timeout.ms passes.

Every transaction writes N records alternating over 2 partitions, so each partition gets K, then
a marker: offsets below are per partition. After a commit or abort a scenario waits until the
last stable offset reaches the high watermark (the markers are written after EndTxn answers)
before it reads to the end. kcat has no transactional producer: its cells skip.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from compat_tests.clients import LATEST, READ_COMMITTED, READ_UNCOMMITTED, ClientError, Message, Record

PARTITIONS = 2
N = 10
K = N // PARTITIONS
FENCED = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}
# conftest's shared settings look for timed-out transactions every 500 ms on both brokers
TIMEOUT_MS = 3000


def _batch(tag: bytes) -> list[Message]:
    return [Message(b"%s-%d" % (tag, i), key=b"k%d" % i, partition=i % PARTITIONS) for i in range(N)]


def _expected(tag: bytes, first_offset: int) -> dict[int, list[tuple[int, bytes]]]:
    """What partition p holds of _batch(tag), as (offset, value) in order, from `first_offset`."""
    return {p: [(first_offset + j, b"%s-%d" % (tag, p + PARTITIONS * j)) for j in range(K)]
            for p in range(PARTITIONS)}


def _by_partition(records: list[Record]) -> dict[int, list[tuple[int, bytes]]]:
    return {p: [(r.offset, r.value) for r in records if r.partition == p] for p in range(PARTITIONS)}


def _joined(*parts: dict[int, list]) -> dict[int, list]:
    return {p: [x for part in parts for x in part[p]] for p in range(PARTITIONS)}


def _read(client, topic: str, isolation: str) -> dict[int, list[tuple[int, bytes]]]:
    """Both partitions from the start up to the end offsets (the LSO under read_committed)."""
    return _by_partition(client.consume(topic, list(range(PARTITIONS)), "earliest", isolation=isolation))


def _stable_offsets(reference, topic: str) -> tuple[list[int], list[int]]:
    """(ListOffsets latest read_committed, read_uncommitted) per partition, by the reference client."""
    return ([reference.list_offset(topic, p, LATEST, isolation=READ_COMMITTED)[0] for p in range(PARTITIONS)],
            [reference.list_offset(topic, p, LATEST)[0] for p in range(PARTITIONS)])


def _wait_stable(reference, topic: str, timeout: float = 20.0) -> float:
    """Until every partition's last stable offset reaches its high watermark; returns when (monotonic)."""
    deadline = time.monotonic() + timeout
    while True:
        stable, high = _stable_offsets(reference, topic)
        if stable == high:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: last stable offsets {stable} still below the high watermarks "
                                 f"{high} after {timeout} s")
        time.sleep(0.2)


@pytest.fixture
def producer(client, name):
    """Makes transactional producers of the client under test with this test's transactional.id."""
    made = []

    def make(**kwargs):
        made.append(client.transactional_producer(name, **kwargs))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_committed_transaction_is_read_once_at_either_isolation(client, new_topic, producer, reference):
    topic = new_topic(PARTITIONS)
    p = producer()
    p.begin()
    p.send(topic, _batch(b"c"))
    p.commit()
    _wait_stable(reference, topic)
    assert _read(client, topic, READ_COMMITTED) == _expected(b"c", 0)
    assert _read(client, topic, READ_UNCOMMITTED) == _expected(b"c", 0)


def test_aborted_transaction_is_skipped_by_read_committed(client, new_topic, producer, reference):
    topic = new_topic(PARTITIONS)
    p = producer()
    p.begin()
    p.send(topic, _batch(b"a"))
    p.abort()
    _wait_stable(reference, topic)
    assert _read(client, topic, READ_COMMITTED) == {0: [], 1: []}
    assert _read(client, topic, READ_UNCOMMITTED) == _expected(b"a", 0)
    p.begin()
    p.send(topic, _batch(b"c"))
    p.commit()
    _wait_stable(reference, topic)
    # the abort marker took offset K, the commit marker 2K + 1: neither surfaces
    assert _read(client, topic, READ_COMMITTED) == _expected(b"c", K + 1)
    assert _read(client, topic, READ_UNCOMMITTED) == _joined(_expected(b"a", 0), _expected(b"c", K + 1))


def test_open_transaction_holds_read_committed_at_the_last_stable_offset(client, new_topic, producer,
                                                                          reference):
    topic = new_topic(PARTITIONS)
    reference.produce(topic, _batch(b"plain"))
    p = producer()
    p.begin()
    p.send(topic, _batch(b"open"))
    partitions = list(range(PARTITIONS))
    for part in partitions:
        assert client.list_offset(topic, part, LATEST, isolation=READ_COMMITTED)[0] == K
        assert client.list_offset(topic, part, LATEST)[0] == 2 * K
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(client.consume, topic, partitions, "earliest", count=2 * N, timeout=60,
                           isolation=READ_COMMITTED)
        brief = client.consume(topic, partitions, "earliest", count=2 * N, timeout=5, isolation=READ_COMMITTED)
        assert _by_partition(brief) == _expected(b"plain", 0)
        assert _read(client, topic, READ_UNCOMMITTED) == _joined(_expected(b"plain", 0), _expected(b"open", K))
        assert not held.done(), f"a read_committed reader got past the open transaction: {held.result()}"
        p.commit()
        assert _by_partition(held.result()) == _joined(_expected(b"plain", 0), _expected(b"open", K))
    _wait_stable(reference, topic)
    for part in partitions:
        assert client.list_offset(topic, part, LATEST, isolation=READ_COMMITTED)[0] == 2 * K + 1


def _wait_committed(client, group: str, topic: str, expected: dict[int, int], timeout: float = 20.0) -> None:
    """The offsets land with the transaction's marker in the offsets topic, after EndTxn answers."""
    deadline = time.monotonic() + timeout
    while (found := client.committed(group, topic, list(range(PARTITIONS)))) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"group {group} committed {found}, not {expected}, after {timeout} s")
        time.sleep(0.3)


def test_consume_transform_produce_moves_group_offsets_only_on_commit(client, new_topic, reference, name):
    source, sink = new_topic(PARTITIONS, suffix="-in"), new_topic(PARTITIONS, suffix="-out")
    reference.produce(source, _batch(b"first"))
    read = client.transform(name, source, sink, N, commit=True)
    assert _by_partition(read) == _expected(b"first", 0)
    _wait_committed(client, name, source, {0: K, 1: K})
    reference.produce(source, _batch(b"second"))
    read = client.transform(name, source, sink, N, commit=False)
    assert _by_partition(read) == _expected(b"second", K)  # resumed at the committed offsets
    _wait_stable(reference, sink)
    assert _read(client, sink, READ_COMMITTED) == _expected(b"out-first", 0)
    assert _read(client, sink, READ_UNCOMMITTED) == _joined(_expected(b"out-first", 0),
                                                            _expected(b"out-second", K + 1))
    assert client.committed(name, source, [0, 1]) == {0: K, 1: K}  # the abort left them


def test_second_producer_with_the_same_id_fences_the_first(client, new_topic, producer, reference):
    topic = new_topic(PARTITIONS)
    zombie = producer()
    zombie.begin()
    zombie.send(topic, _batch(b"zombie"))
    successor = producer()  # same transactional.id: its InitProducerId aborts the zombie's transaction
    with pytest.raises(ClientError) as fenced:
        zombie.send(topic, _batch(b"late"))
        zombie.commit()
    assert fenced.value.code in FENCED, fenced.value
    successor.begin()
    successor.send(topic, _batch(b"successor"))
    successor.commit()
    _wait_stable(reference, topic)
    assert _read(client, topic, READ_COMMITTED) == _expected(b"successor", K + 1)
    assert _read(client, topic, READ_UNCOMMITTED) == _joined(_expected(b"zombie", 0),
                                                             _expected(b"successor", K + 1))


def test_abandoned_transaction_is_aborted_after_its_timeout(client, new_topic, producer, reference):
    topic = new_topic(PARTITIONS)
    crashed = producer(transaction_timeout_ms=TIMEOUT_MS)
    started = time.monotonic()
    crashed.begin()
    crashed.send(topic, _batch(b"abandoned"))
    crashed.abandon()
    assert _stable_offsets(reference, topic) == ([0] * PARTITIONS, [K] * PARTITIONS)
    aborted = _wait_stable(reference, topic, timeout=TIMEOUT_MS / 1000 + 20)
    assert aborted - started >= TIMEOUT_MS / 1000 - 0.1, "aborted before transaction.timeout.ms passed"
    assert _read(client, topic, READ_COMMITTED) == {0: [], 1: []}
    successor = producer(transaction_timeout_ms=TIMEOUT_MS)
    successor.begin()
    successor.send(topic, _batch(b"successor"))
    successor.commit()
    _wait_stable(reference, topic)
    assert _read(client, topic, READ_COMMITTED) == _expected(b"successor", K + 1)
