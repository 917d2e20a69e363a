"""The client harnesses themselves work, with no broker: usage, errors, versions."""

from __future__ import annotations

import socket
import time

import pytest

from compat_tests.clients.java import JavaClientError, kafka_clients_version, require_java, run_java
from compat_tests.clients.kcat import KcatError, require_kcat, run_kcat

pytestmark = pytest.mark.clients


@pytest.fixture
def java() -> None:
    require_java()


@pytest.fixture
def kcat() -> None:
    require_kcat()


@pytest.fixture
def closed_port() -> str:
    """A local address nothing listens on: bound, never listening, so connects are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_java_harness_runs_kafka_clients_3_or_newer(java) -> None:
    assert int(kafka_clients_version().split(".")[0]) >= 3


def test_java_harness_help_prints_usage(java) -> None:
    with pytest.raises(JavaClientError) as e:
        run_java([], timeout=30)
    assert "usage: GregorJavaClient" in e.value.stderr


def test_java_harness_rejects_missing_topic_with_usage_error(java, closed_port) -> None:
    with pytest.raises(JavaClientError) as e:
        run_java(["produce", "--bootstrap", closed_port, "--count", "1"], timeout=30)
    assert "exited 2" in str(e.value)
    assert "produce needs --topic" in str(e.value)


@pytest.mark.parametrize(
    "command",
    [
        ["produce", "--topic", "t", "--count", "1"],
        ["consume-assign", "--topic", "t"],
        ["consume-group", "--group", "g", "--topic", "t"],
        ["admin", "list-topics"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
def test_java_harness_fails_fast_and_clearly_on_unreachable_bootstrap(java, closed_port, command) -> None:
    started = time.monotonic()
    with pytest.raises(JavaClientError) as e:
        run_java([*command, "--bootstrap", closed_port, "--timeout-ms", "2000"], timeout=30)
    assert time.monotonic() - started < 20
    assert "exited 1" in str(e.value)
    assert "TimeoutException" in str(e.value)
    assert "no usable answer from the --bootstrap broker" in str(e.value)


def test_kcat_reports_its_librdkafka_version(kcat) -> None:
    out = run_kcat(["-V"]).stdout
    assert "librdkafka" in out


def test_kcat_metadata_on_unreachable_bootstrap_fails_within_timeout(kcat, closed_port) -> None:
    with pytest.raises(KcatError):
        run_kcat(["-b", closed_port, "-L", "-m", "2"], timeout=20)


def test_java_harness_call_past_its_deadline_exits_3_and_the_next_call_still_runs(java, closed_port) -> None:
    """The kept JVM (run_java's serve mode) answers a hung call with exit 3 and ends; the next call
    starts a new one, and sees nothing of the hung call's output."""
    with pytest.raises(JavaClientError) as hung:
        run_java(["consume-assign", "--topic", "t", "--bootstrap", closed_port, "--timeout-ms", "20000",
                  "--deadline-ms", "1500"], timeout=30)
    assert "exited 3" in str(hung.value) and "hard deadline of 1500 ms passed" in hung.value.stderr
    with pytest.raises(JavaClientError) as e:
        run_java(["produce", "--bootstrap", closed_port, "--count", "1"], timeout=30)
    assert "exited 2" in str(e.value) and "hard deadline" not in e.value.stderr


def test_java_harness_calls_from_two_threads_run_side_by_side(java, closed_port) -> None:
    """A call made while the kept JVM is busy runs in a JVM of its own, rather than waiting."""
    from concurrent.futures import ThreadPoolExecutor

    def call(topic: str) -> str:
        try:
            run_java(["produce", "--topic", topic, "--count", "1", "--bootstrap", closed_port,
                      "--timeout-ms", "3000"], timeout=30)
        except JavaClientError as e:
            return e.stderr
        return ""

    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        errors = list(pool.map(call, ["a", "b"]))
    assert all("no usable answer from the --bootstrap broker" in err for err in errors)
    assert time.monotonic() - started < 20  # two 3 s timeouts, not one after the other plus waiting


def test_java_harness_keeps_an_empty_last_argument(java, closed_port) -> None:
    """An empty argument reaches the command: not a usage error ("--key-prefix needs a value")."""
    with pytest.raises(JavaClientError) as e:
        run_java(["produce", "--topic", "t", "--count", "1", "--bootstrap", closed_port, "--timeout-ms", "2000",
                  "--key-prefix", ""], timeout=30)
    assert "exited 1" in str(e.value) and "TimeoutException" in str(e.value)
