"""kcat (librdkafka 2.0.2 on Debian 12) against a live Gregor: metadata, produce, consume."""

from __future__ import annotations

import json

import pytest

from tests.clients.kcat import require_kcat, run_kcat

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


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_then_consume_round_trips_keys_and_values(bootstrap, topic_name, codec):
    lines = [f"key-{i}:value {i}" for i in range(50)]
    produce(bootstrap, topic_name, lines, "-K", ":", "-z", codec)
    got = consume(bootstrap, topic_name)
    assert [(m["partition"], m["offset"]) for m in got] == [(0, i) for i in range(50)]
    assert [(m["key"], m["payload"]) for m in got] == [(f"key-{i}", f"value {i}") for i in range(50)]


def test_produce_with_headers_then_consume_them(bootstrap, topic_name):
    produce(bootstrap, topic_name, ["a", "b"], "-H", "source=kcat", "-H", "n=1")
    got = consume(bootstrap, topic_name)
    assert [m["payload"] for m in got] == ["a", "b"]
    assert [m["headers"] for m in got] == [["source", "kcat", "n", "1"]] * 2


def test_null_keys_and_null_values_round_trip(bootstrap, topic_name):
    produce(bootstrap, topic_name, [":", "k:", ":v"], "-K", ":", "-Z")  # -Z: empty means null
    got = consume(bootstrap, topic_name)
    assert [(m["key"], m["payload"]) for m in got] == [(None, None), ("k", None), (None, "v")]


def test_consume_from_offset_and_relative_end(bootstrap, topic_name):
    produce(bootstrap, topic_name, [f"m{i}" for i in range(10)])
    from_offset = run_kcat(["-b", bootstrap, "-C", "-t", topic_name, "-o", "7", "-e", "-f", "%o:%s\\n"])
    assert from_offset.stdout.splitlines() == ["7:m7", "8:m8", "9:m9"]
    last_two = run_kcat(["-b", bootstrap, "-C", "-t", topic_name, "-o", "-2", "-e", "-f", "%o:%s\\n"])
    assert last_two.stdout.splitlines() == ["8:m8", "9:m9"]


def test_consume_from_timestamp(bootstrap, topic_name):
    produce(bootstrap, topic_name, ["early"])
    [early] = consume(bootstrap, topic_name)
    later = early["ts"] + 60_000
    run_kcat(["-b", bootstrap, "-P", "-t", topic_name, "-p", "0"], input="late\n")
    out = run_kcat(
        ["-b", bootstrap, "-C", "-t", topic_name, "-o", f"s@{early['ts'] + 1}", "-e", "-f", "%s\\n"]
    )
    assert out.stdout.splitlines() == ["late"]
    none = run_kcat(["-b", bootstrap, "-C", "-t", topic_name, "-o", f"s@{later}", "-e", "-f", "%s\\n"])
    assert none.stdout.splitlines() == []


def test_idempotent_produce_round_trips(bootstrap, topic_name):
    produce(bootstrap, topic_name, [f"m{i}" for i in range(30)], "-X", "enable.idempotence=true")
    assert [m["payload"] for m in consume(bootstrap, topic_name)] == [f"m{i}" for i in range(30)]


def test_query_offsets_for_earliest_latest_and_time(bootstrap, topic_name):
    produce(bootstrap, topic_name, [f"m{i}" for i in range(5)])
    [first] = consume(bootstrap, topic_name, "-c", "1")

    def query(at: int) -> str:
        return run_kcat(["-b", bootstrap, "-Q", "-t", f"{topic_name}:0:{at}"]).stdout.strip()

    assert query(-2) == f"{topic_name} [0] offset 0"
    assert query(-1) == f"{topic_name} [0] offset 5"
    assert query(first["ts"]) == f"{topic_name} [0] offset 0"


def test_balanced_consumer_group_resumes_from_committed_offsets(bootstrap, topic_name):
    group = f"group-{topic_name}"
    produce(bootstrap, topic_name, [f"m{i}" for i in range(10)])

    def group_consume() -> list[str]:
        # not -o: kcat would assign that offset and ignore the committed one
        args = [
            "-b",
            bootstrap,
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-e",
            "-f",
            "%s\\n",
            topic_name,
        ]
        return run_kcat(args, timeout=60).stdout.splitlines()

    assert group_consume() == [f"m{i}" for i in range(10)]
    produce(bootstrap, topic_name, ["late"])
    assert group_consume() == ["late"]
