"""Offset lookups and positioning: offsets_for_times (match, no match, -1, -2, -3), replay from a
time, and fetches out of range under each auto.offset.reset."""

from __future__ import annotations

import threading

import pytest

from compat_tests.clients import EARLIEST, LATEST, MAX_TIMESTAMP, ClientError, Message

BASE_TS = 1_700_000_000_000  # fixed CreateTime timestamps make every answer exact
COUNT = 100


@pytest.fixture
def timed_topic(new_topic, reference) -> str:
    """COUNT records at BASE_TS, BASE_TS + 10, ... on partition 0, sent by the reference client."""
    topic = new_topic(configs={"retention.ms": "-1"})  # BASE_TS is older than the default 7 days' retention
    reference.produce(topic, [Message(b"m%d" % i, timestamp=BASE_TS + 10 * i) for i in range(COUNT)])
    return topic


LOOKUPS = {
    "exact-time": (BASE_TS + 500, (50, BASE_TS + 500)),
    "between-times": (BASE_TS + 505, (51, BASE_TS + 510)),
    "before-first": (BASE_TS - 1, (0, BASE_TS)),
    "no-match": (BASE_TS + 10 * COUNT, (-1, -1)),
    "latest(-1)": (LATEST, (COUNT, -1)),
    "earliest(-2)": (EARLIEST, (0, -1)),
    "max-timestamp(-3)": (MAX_TIMESTAMP, (COUNT - 1, BASE_TS + 10 * (COUNT - 1))),
}


@pytest.mark.parametrize("lookup", list(LOOKUPS))
def test_offsets_for_times(client, timed_topic, lookup):
    timestamp, (offset, found_ts) = LOOKUPS[lookup]
    got_offset, got_ts = client.list_offset(timed_topic, 0, timestamp)
    assert got_offset == offset
    if got_ts is not None and timestamp >= 0:  # Kafka leaves the timestamp of -1 / -2 answers unspecified
        assert got_ts == found_ts


def test_replay_from_a_time(client, timed_topic):
    got = client.consume(timed_topic, [0], f"time:{BASE_TS + 905}")
    assert [(r.offset, r.value) for r in got] == [(i, b"m%d" % i) for i in range(91, COUNT)]
    assert [r.timestamp for r in got] == [BASE_TS + 10 * i for i in range(91, COUNT)]


def test_replay_from_an_offset(client, timed_topic):
    got = client.consume(timed_topic, [0], 97)
    assert [(r.offset, r.value) for r in got] == [(i, b"m%d" % i) for i in range(97, COUNT)]


@pytest.fixture
def short_topic(new_topic, reference) -> str:
    topic = new_topic()
    reference.produce(topic, [Message(b"early-%d" % i) for i in range(3)])
    return topic


def test_out_of_range_fetch_with_reset_earliest_restarts_at_log_start(client, short_topic):
    got = client.consume(short_topic, [0], 50, count=3, reset="earliest")
    assert [(r.offset, r.value) for r in got] == [(i, b"early-%d" % i) for i in range(3)]


def test_out_of_range_fetch_with_reset_latest_waits_at_log_end(client, short_topic, reference):
    """Reset to the end, so the first record read is one produced after the reset, never 0-2."""
    stop = threading.Event()

    def keep_producing() -> None:
        for i in range(40):
            if stop.wait(0.5):
                return
            reference.produce(short_topic, [Message(b"late-%d" % i)])

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        [first] = client.consume(short_topic, [0], 50, count=1, reset="latest", timeout=25)
    finally:
        stop.set()
        producer.join(10)
    assert first.offset >= 3 and first.value.startswith(b"late-")


def test_out_of_range_fetch_without_reset_fails_with_offset_out_of_range(client, short_topic):
    with pytest.raises(ClientError) as e:
        client.consume(short_topic, [0], 50, count=1, reset="none", timeout=8)
    assert e.value.code == "OFFSET_OUT_OF_RANGE"
