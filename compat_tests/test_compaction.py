"""Log compaction (cleanup.policy=compact) as clients see it: after the cleaner has run, a
reader from the earliest offset gets the latest value of every key at its original offset,
the superseded records are gone (offsets keep their gaps), the log start stays 0, and a
tombstone disappears after delete.retention.ms.

Both brokers run their cleaner every log.cleaner.backoff.ms=500 (conftest's shared settings).
Kafka cleans only rolled segments, so the topics roll every 100 ms (segment.ms) and the
scenario pauses between rounds; Gregor has no per-partition segments and cleans all but the
partition's last batch. Each scenario therefore ends with a sentinel record produced after a
pause, and asks only what both promise: the latest record of every key survives, and what
was superseded before the sentinel goes."""

from __future__ import annotations

import time

import pytest

from compat_tests.clients import EARLIEST, Message

KEYS = 10
ROUNDS = 6
# a tombstone stays at least this long: the scenario reads it within that time, however loaded
# the machine, then waits it out
DELETE_RETENTION_S = 5.0
COMPACT = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": str(int(DELETE_RETENTION_S * 1000))}


def _sentinel(reference, topic: str) -> None:
    # Time passing on purpose: segment.ms is a clock, and past it Kafka rolls the segment before
    # this record (nothing answers "the next record rolls").
    time.sleep(0.3)
    reference.produce(topic, [Message(b"end", key=b"sentinel")])


def _compacted(reference, topic: str, done, timeout: float = 90.0) -> list:
    """Read the whole partition until `done(records)` holds (the cleaner runs in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        records = reference.consume(topic, [0], "earliest", timeout=20.0)
        if done(records) or time.monotonic() > deadline:
            return records
        time.sleep(0.5)


@pytest.fixture
def compacted_topic(new_topic, reference):
    """KEYS keys updated ROUNDS times (value b"<key>:<round>"), a round every 150 ms, then the
    sentinel; returned once the reference client sees every superseded record gone."""
    topic = new_topic(configs=COMPACT)
    for r in range(ROUNDS):
        reference.produce(topic, [Message(b"k%d:%d" % (k, r), key=b"k%d" % k) for k in range(KEYS)])
        time.sleep(0.15)
    _sentinel(reference, topic)
    records = _compacted(reference, topic, lambda rs: len(rs) <= KEYS + 1)
    assert len(records) <= KEYS + 1, f"the cleaner did not run within 90 s: {len(records)} records"
    return topic


def test_a_reader_gets_the_latest_value_of_every_key_at_its_offset(client, compacted_topic):
    records = client.consume(compacted_topic, [0], "earliest")
    latest = {r.key: (r.offset, r.value) for r in records}
    assert {k: v for k, (_, v) in latest.items() if k != b"sentinel"} == \
        {b"k%d" % k: b"k%d:%d" % (k, ROUNDS - 1) for k in range(KEYS)}
    # offsets are the original ones: round r's key k was offset r*KEYS + k
    assert {k: o for k, (o, _) in latest.items() if k != b"sentinel"} == \
        {b"k%d" % k: (ROUNDS - 1) * KEYS + k for k in range(KEYS)}
    assert [r.offset for r in records] == sorted(r.offset for r in records)
    assert client.list_offset(compacted_topic, 0, EARLIEST)[0] == 0  # compaction leaves the log start
    assert records[-1].key == b"sentinel" and records[-1].offset == ROUNDS * KEYS


def test_a_tombstone_removes_its_key_after_delete_retention(client, new_topic, reference):
    topic = new_topic(configs=COMPACT)
    # time passing on purpose (past segment.ms = 100 ms): each produce goes to a segment of its own
    reference.produce(topic, [Message(b"v", key=b"gone"), Message(b"v", key=b"stays")])
    time.sleep(0.15)
    reference.produce(topic, [Message(None, key=b"gone")])
    time.sleep(0.15)
    _sentinel(reference, topic)
    first = _compacted(reference, topic, lambda rs: [r.key for r in rs] == [b"stays", b"gone", b"sentinel"])
    assert [(r.key, r.value) for r in first] == [(b"stays", b"v"), (b"gone", None), (b"sentinel", b"end")]
    time.sleep(DELETE_RETENTION_S + 0.2)  # time passing on purpose: past delete.retention.ms
    _sentinel(reference, topic)  # more dirty data: both brokers clean again
    records = _compacted(reference, topic, lambda rs: b"gone" not in {r.key for r in rs})
    assert b"gone" not in {r.key for r in records}
    got = client.consume(topic, [0], "earliest")
    assert (got[0].offset, got[0].key) == (1, b"stays")
    assert b"gone" not in {r.key for r in got}
