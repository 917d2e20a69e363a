"""The CLI's parsing and printing rules with plain values (broker/cli/format.py, protocol/record_text.py)."""

from __future__ import annotations

import pytest

from broker.cli.admin import describe_text
from broker.cli.format import (
    OffsetMove,
    UsageError,
    fields,
    lag,
    parse_bootstrap,
    parse_duration_ms,
    parse_key_value,
    parse_time_ms,
    parse_topic_partitions,
    reset_plan,
    table,
)
from protocol.record_text import record_json, text_or_base64


@pytest.mark.parametrize("text, ms", [
    ("1700000000000", 1_700_000_000_000),
    ("2023-11-14T22:13:20Z", 1_700_000_000_000),
    ("2023-11-14T22:13:20", 1_700_000_000_000),  # no zone: UTC
    ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
    ("2023-11-14T22:13:20.250Z", 1_700_000_000_250),
])
def test_times_are_iso_8601_or_epoch_milliseconds(text, ms):
    assert parse_time_ms(text) == ms


@pytest.mark.parametrize("text, ms", [
    ("PT10M", 600_000), ("PT1H30M", 5_400_000), ("P1D", 86_400_000), ("P1DT2H", 93_600_000),
    ("PT0.5S", 500), ("pt15s", 15_000),
])
def test_durations_are_kafkas_iso_8601_form(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["10m", "P", "PT", "P1DT", "PT-5M", "P1Y", "yesterday", "1D"])
def test_malformed_durations_are_usage_errors(text):
    with pytest.raises(UsageError, match="ISO 8601 duration"):
        parse_duration_ms(text)


def test_key_value_splits_at_the_first_equals_and_needs_one():
    assert parse_key_value("a=b=c") == ("a", "b=c")
    assert parse_key_value("empty=") == ("empty", "")
    for bad in ("novalue", "=v", ""):
        with pytest.raises(UsageError, match="expected KEY=VALUE"):
            parse_key_value(bad)


def test_bootstrap_takes_host_port_lists():
    assert parse_bootstrap("127.0.0.1:9092,b:19092") == [("127.0.0.1", 9092), ("b", 19092)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]
    for bad in ("localhost", "h:0", "h:port", ":9092", "h:70000"):
        with pytest.raises(UsageError, match="HOST:PORT"):
            parse_bootstrap(bad)


def test_topic_partitions_as_kafka_consumer_groups_takes_them():
    assert parse_topic_partitions("orders") == ("orders", None)
    assert parse_topic_partitions("orders:2,0,2") == ("orders", [0, 2])
    with pytest.raises(UsageError):
        parse_topic_partitions("orders:a")


def test_tables_align_columns_and_show_none_as_a_dash():
    assert table(("NAME", "N"), [("long-name", 1), ("x", None)]) == "NAME       N\nlong-name  1\nx          -\n"
    assert fields([("GROUP", "g"), ("MEMBERS", 0)]) == "GROUP    g\nMEMBERS  0\n"


def test_a_reset_is_held_within_the_log_and_goes_to_the_end_when_a_time_finds_nothing():
    earliest = {("t", 0): 10, ("t", 1): 0, ("t", 2): 0}
    latest = {("t", 0): 50, ("t", 1): 8, ("t", 2): 8}
    assert reset_plan({("t", 0): 3, ("t", 1): 99, ("t", 2): None}, earliest, latest, {("t", 0): 40}) == [
        OffsetMove("t", 0, 40, 10), OffsetMove("t", 1, None, 8), OffsetMove("t", 2, None, 8)]
    assert reset_plan({("t", 1): -1}, earliest, latest, {})[0].new_offset == 8


def test_lag_is_unknown_without_a_committed_offset():
    assert lag(3, 10) == 7
    assert lag(None, 10) is None and lag(-1, 10) is None and lag(3, None) is None
    assert lag(12, 10) == 0


def test_record_bytes_print_as_text_or_base64():
    assert text_or_base64(b"caf\xc3\xa9") == ("café", "utf-8")
    assert text_or_base64(b"\xff\x00") == ("/wA=", "base64")
    assert text_or_base64(None) == (None, "null")
    shown = record_json("t", 1, 5, 1000, None, b"\xff", [("h", b"x"), ("n", None)])
    assert shown == {"topic": "t", "partition": 1, "offset": 5, "timestamp": 1000, "key": None,
                     "key_encoding": "null", "value": "/w==", "value_encoding": "base64",
                     "headers": [{"key": "h", "value": "x", "encoding": "utf-8"},
                                 {"key": "n", "value": None, "encoding": "null"}]}


def _described(alive, listed, leader):
    return {"name": "orders", "configs": [], "alive": alive,
            "brokers": [{"id": b, "host": "127.0.0.1", "port": 9190 + b, "answers": b in alive} for b in listed],
            "partitions": [{"partition": 0, "leader": leader, "replicas": listed, "isr": listed,
                            "log_start_offset": 0 if leader >= 0 else None,
                            "log_end_offset": 5 if leader >= 0 else None}]}


def test_topic_describe_names_broker_ids_so_a_single_node_0_does_not_read_as_a_count():
    text = describe_text(_described([0], [0], 0))
    assert "\nANSWERING BROKER IDS  0\n" in text and "NOT ANSWERING" not in text


def test_topic_describe_during_a_failover_shows_leaderless_partitions_and_the_silent_broker():
    rows = table_rows(describe_text(_described([1, 2], [1, 2, 3], -1)))
    assert ["0", "none", "1,2,3", "1,2,3", "-", "-"] in rows
    assert ["ANSWERING", "BROKER", "IDS", "1,2"] in rows and ["LISTED,", "NOT", "ANSWERING", "3"] in rows


def table_rows(text):
    return [line.split() for line in text.splitlines() if line.strip()]
