"""Bad input that needs no broker: a broker that is down, bad arguments, malformed --config, and the
help every command prints. Each ends in one `gregor: ...` line on stderr and a non-zero status."""

from __future__ import annotations

import socket
import time

import pytest

from tests.cli.conftest import assert_fails, gregor


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed, so the OS refuses connections)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [
    ("topic", "list"), ("topic", "create", "t"), ("topic", "describe", "t"), ("group", "list"),
    ("group", "describe", "g"), ("group", "reset-offsets", "g", "--topic", "t", "--to-earliest"),
    ("produce", "t"), ("consume", "t"), ("cluster", "info"), ("query", "--topic", "t", "--from", "0"),
])
def test_a_broker_that_is_down_fails_at_once(closed_port, command):
    started = time.monotonic()
    done = gregor(*command, "--bootstrap", f"127.0.0.1:{closed_port}", stdin=b"x\n")
    assert time.monotonic() - started < 10  # kafka-python alone would retry for 30 s
    assert_fails(done, 1, f"no broker answers at 127.0.0.1:{closed_port}", "Connection refused")


@pytest.mark.parametrize("args, fragments", [
    (("topic", "create", "t", "--config", "retention.ms"), ("topic create", "--config", "expected KEY=VALUE",
                                                             "'retention.ms'")),
    (("topic", "create", "t", "--config", "=1"), ("expected KEY=VALUE",)),
    (("topic", "alter", "t", "--config", "cleanup.policy"), ("topic alter", "expected KEY=VALUE")),
    (("produce", "t", "--header", "nothing"), ("produce", "--header", "expected KEY=VALUE")),
    (("topic", "create"), ("topic create", "the following arguments are required: name")),
    (("topic", "create", "t", "--partitions", "0"), ("--partitions", "expected 1 or more")),
    (("topic", "create", "t", "--partitions", "many"), ("--partitions", "expected a whole number")),
    (("topic", "frobnicate"), ("topic", "invalid choice: 'frobnicate'")),
    (("topic", "list", "--output", "yaml"), ("--output", "invalid choice: 'yaml'")),
    (("topic", "list", "--bootstrap", "localhost"), ("--bootstrap expects HOST:PORT, got 'localhost'",)),
    (("group", "reset-offsets", "g", "--topic", "t"), ("one of the arguments --to-earliest",)),
    (("group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"), ("not allowed with",)),
    (("group", "reset-offsets", "g", "--topic", "t", "--by-duration", "10m"), ("ISO 8601 duration", "'10m'")),
    (("group", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"), ("ISO 8601 time",)),
    (("group", "reset-offsets", "g", "--topic", "t:x", "--to-latest"), ("TOPIC:PARTITION",)),
    (("consume", "t", "--from-beginning", "--offset", "3"), ("not allowed with",)),
    (("consume", "t", "--offset", "-1"), ("--offset", "expected 0 or more")),
    (("consume", "t", "--group", "g", "--partition", "0"), ("--group cannot be combined",)),
    (("consume", "t", "--from-time", "soon"), ("ISO 8601 time",)),
    (("produce", "t", "--acks", "2"), ("--acks", "invalid choice")),
    (("produce", "t", "--key-separator", ""), ("--key-separator must not be empty",)),
    (("query", "--topic", "t"), ("give --msg-id ID, --topic T --key K, or --topic T --from TIME",)),
    (("query", "--topic", "t", "--key", "k"), ("need --admin HOST:PORT",)),
    (("query", "--msg-id", "00", "--key", "k"), ("--msg-id takes no --topic or --key",)),
])
def test_bad_arguments_exit_2_with_one_line(closed_port, args, fragments):
    """Caught before any connection: the bootstrap given is a closed port."""
    assert_fails(gregor(*args, "--bootstrap", f"127.0.0.1:{closed_port}"), 2, *fragments)


def test_a_missing_command_exits_2_with_one_line():
    assert_fails(gregor(), 2, "the following arguments are required: COMMAND")
    assert_fails(gregor("group"), 2, "group: the following arguments are required: COMMAND")


@pytest.mark.parametrize("command", [
    (), ("topic",), ("topic", "create"), ("topic", "list"), ("topic", "describe"), ("topic", "alter"),
    ("topic", "add-partitions"), ("topic", "delete"), ("topic", "create-view"), ("group",), ("group", "list"),
    ("group", "describe"), ("group", "reset-offsets"), ("group", "delete"), ("produce",), ("consume",),
    ("cluster",), ("cluster", "info"), ("query",), ("replay",),
])
def test_every_command_has_help(command):
    done = gregor(*command, "--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"usage: {' '.join(('gregor',) + command)}")
    if command and command not in (("topic",), ("group",), ("cluster",)):
        assert "--bootstrap HOST:PORT" in done.stdout


def test_top_level_help_lists_the_operator_commands():
    text = gregor("--help").stdout
    for command in ("serve", "topic", "group", "produce", "consume", "cluster", "query"):
        assert f"    {command} " in text
    assert "Exit status: 0 done, 1 the command failed" in text
