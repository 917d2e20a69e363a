"""kcat (librdkafka 2.0.2 on Debian 12) against a live Gregor: metadata and relative offsets
(round trips, offsets, groups: compat_tests/)."""

from __future__ import annotations

import json

import pytest

from compat_tests.clients.kcat import require_kcat, run_kcat

pytestmark = pytest.mark.clients


@pytest.fixture(autouse=True)
def _kcat() -> None:
    require_kcat()


def produce(bootstrap: str, topic: str, lines: list[str], *args: str) -> None:
    """kcat -P, one message per line; the topic is auto-created on first use."""
    run_kcat(["-b", bootstrap, "-P", "-t", topic, *args], input="".join(f"{line}\n" for line in lines))


def consume(bootstrap: str, topic: str, *args: str) -> list[dict]:
    """kcat -C from the beginning to the current end (-e), one JSON envelope per message."""
    out = run_kcat(["-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J", *args]).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def metadata(bootstrap: str, *args: str) -> dict:
    return json.loads(run_kcat(["-b", bootstrap, "-L", "-J", *args]).stdout)


def test_metadata_lists_the_broker_at_its_bootstrap_address(bootstrap):
    [broker] = metadata(bootstrap)["brokers"]
    assert broker["name"] == bootstrap


def test_plain_metadata_listing_names_topic_and_partitions(bootstrap, topic_name):
    produce(bootstrap, topic_name, ["x"])
    out = run_kcat(["-b", bootstrap, "-L", "-t", topic_name]).stdout
    assert f'topic "{topic_name}" with 1 partitions:' in out
    assert "partition 0, leader" in out


def test_metadata_for_produced_topic_shows_its_partition_and_leader(bootstrap, topic_name):
    produce(bootstrap, topic_name, ["x"])
    meta = metadata(bootstrap, "-t", topic_name)
    [broker] = meta["brokers"]
    [topic] = meta["topics"]
    assert topic["topic"] == topic_name and "error" not in topic
    assert [(p["partition"], p["leader"]) for p in topic["partitions"]] == [(0, broker["id"])]


def test_consume_from_offset_and_relative_end(bootstrap, topic_name):
    produce(bootstrap, topic_name, [f"m{i}" for i in range(10)])
    from_offset = run_kcat(["-b", bootstrap, "-C", "-t", topic_name, "-o", "7", "-e", "-f", "%o:%s\\n"])
    assert from_offset.stdout.splitlines() == ["7:m7", "8:m8", "9:m9"]
    last_two = run_kcat(["-b", bootstrap, "-C", "-t", topic_name, "-o", "-2", "-e", "-f", "%o:%s\\n"])
    assert last_two.stdout.splitlines() == ["8:m8", "9:m9"]