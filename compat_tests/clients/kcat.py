"""kcat adapter (librdkafka's command-line client, Debian 12: kcat 1.7.1 on librdkafka 2.0.2).

bin/setup-clients installs it with apt-get. This module finds it, runs it, and expresses what
kcat can: text keys and values (tab-separated, one per line), a header set per run, no
per-message timestamps, no delivery offsets, no admin beyond metadata. Producers use
`partitioner=murmur2_random` (see confluent.py).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import threading

import pytest

from compat_tests.clients import READ_UNCOMMITTED, ClientError, Message, Record, Unsupported, stop_process


class KcatError(Exception):
    """kcat exited non-zero or hung; carries its output."""

    def __init__(self, message: str, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


@functools.cache
def kcat_available() -> tuple[bool, str]:
    """Whether kcat runs; otherwise the reason, for a loud pytest.skip."""
    if shutil.which("kcat") is None:
        return False, "kcat not on PATH (bin/setup-clients installs it with apt-get as root)"
    try:
        proc = subprocess.run(["kcat", "-V"], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"kcat -V failed: {e}"
    if proc.returncode != 0:
        return False, f"kcat -V exited {proc.returncode}: {proc.stderr.strip()}"
    return True, ""


def require_kcat() -> None:
    """Skip the calling test, loudly, when kcat cannot run."""
    ok, reason = kcat_available()
    if not ok:
        pytest.skip(f"kcat unavailable: {reason}")


def run_kcat(
    args: list[str], input: str | None = None, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run `kcat *args` (feeding `input` on stdin) and return the finished process.

    Raises KcatError on a non-zero exit or when it is still running after `timeout` seconds;
    give consumers -e (exit at end of partition) or -c N so they end by themselves.
    """
    try:
        proc = subprocess.run(
            ["kcat", *args], check=False, input=input, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise KcatError(f"kcat {' '.join(args)} still running after {timeout}s: {err[-2000:]}", out, err)
    if proc.returncode != 0:
        raise KcatError(
            f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}",
            proc.stdout,
            proc.stderr,
        )
    return proc


def require() -> None:
    require_kcat()


# librdkafka's error strings -> Kafka error names.
_ERRORS = {
    "Offset out of range": "OFFSET_OUT_OF_RANGE",
    "Message size too large": "MESSAGE_TOO_LARGE",
    "Unknown topic or partition": "UNKNOWN_TOPIC_OR_PARTITION",
    "Local: Unknown topic": "UNKNOWN_TOPIC_OR_PARTITION",
    "Local: Message timed out": "TIMEOUT",
    "Broker: Invalid topic": "INVALID_TOPIC_EXCEPTION",
    "Topic already exists": "TOPIC_ALREADY_EXISTS",
    "Invalid topic": "INVALID_TOPIC_EXCEPTION",
    "API version not supported": "UNSUPPORTED_VERSION",
}
_DELIMITER = "\t"


def error_code(stderr: str) -> str:
    for text, code in _ERRORS.items():
        if text in stderr:
            return code
    return "UNKNOWN"


def _text(data: bytes | None, what: str) -> str:
    if data is None:
        return ""
    text = data.decode("utf-8", errors="strict")
    if "\n" in text or _DELIMITER in text:
        raise Unsupported(f"kcat sends one {what} per line: it cannot send one holding a newline or tab")
    return text


def _needs_nulls(m: Message) -> bool:
    """-Z turns empty keys and values into nulls: a run has either nulls or empty strings, not both."""
    if m.key is None or m.value is None:
        if m.key == b"" or m.value == b"":
            raise Unsupported("kcat cannot send a null and an empty key/value in the same message")
        return True
    return False


class Client:
    name = "kcat"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def run(self, args: list[str], input: str | None = None, timeout: float = 30.0) -> subprocess.CompletedProcess:
        try:
            return run_kcat(["-b", self.bootstrap, *args], input=input, timeout=timeout)
        except KcatError as e:
            raise ClientError(error_code(e.stderr), str(e)) from e

    def produce(self, topic, messages, *, codec="none", idempotent=True, max_request_bytes=None):
        if any(m.timestamp is not None for m in messages):
            raise Unsupported("kcat cannot set a message timestamp when producing")
        config = {"compression.codec": codec, "enable.idempotence": str(idempotent).lower(),
                  "acks": "all" if idempotent else "1", "partitioner": "murmur2_random",
                  "topic.metadata.propagation.max.ms": "5000", "message.timeout.ms": "20000"}
        if max_request_bytes:
            config["message.max.bytes"] = str(max_request_bytes)
        settings = [arg for k, v in config.items() for arg in ("-X", f"{k}={v}")]
        for (nulls, headers, partition), run in itertools.groupby(
                messages, key=lambda m: (_needs_nulls(m), m.headers, m.partition)):
            args = ["-P", "-t", topic, "-K", _DELIMITER, *settings]
            args += ["-Z"] if nulls else []
            args += ["-p", str(partition)] if partition is not None else []
            for name, value in headers:
                args += ["-H", f"{name}={_text(value, 'header')}"]
            lines = "".join(f"{_text(m.key, 'key')}{_DELIMITER}{_text(m.value, 'value')}\n" for m in run)
            self.run(args, input=lines, timeout=60)

    def consume(self, topic, partitions, start, *, count=None, reset=None, timeout=20.0,
                isolation=READ_UNCOMMITTED):
        if isinstance(start, str) and start.startswith("time:"):
            offset = f"s@{start[5:]}"
        else:
            offset = {"earliest": "beginning", "latest": "end"}.get(str(start), str(start))
        got: list[Record] = []
        for partition in partitions:
            args = ["-C", "-t", topic, "-p", str(partition), "-o", offset, "-J", "-X", f"isolation.level={isolation}"]
            args += ["-e"] if count is None else ["-c", str(count - len(got))]
            if reset is not None:
                args += ["-X", f"auto.offset.reset={'error' if reset == 'none' else reset}"]
            out = self.run(args, timeout=timeout).stdout
            got += [_record(json.loads(line)) for line in out.splitlines() if line.strip()]
            if count is not None and len(got) >= count:
                break
        return got

    def list_offset(self, topic, partition, timestamp, *, isolation=READ_UNCOMMITTED):
        if isolation != READ_UNCOMMITTED:
            raise Unsupported("kcat -Q has no isolation level")
        if timestamp == -3:
            raise Unsupported("kcat's librdkafka 2.0.2 sends ListOffsets <= v2; max-timestamp (-3) needs v7")
        out = self.run(["-Q", "-t", f"{topic}:{partition}:{timestamp}"]).stdout
        match = re.search(r"offset (-?\d+)", out)
        if match is None:
            raise ClientError("UNKNOWN", out)
        return int(match.group(1)), None  # kcat prints no timestamp

    def group_consume(self, group, topic, count):
        out = self.run(["-G", group, "-X", "auto.offset.reset=earliest", "-c", str(count), "-J", topic],
                       timeout=60).stdout
        return [_record(json.loads(line)) for line in out.splitlines() if line.strip()]

    def committed(self, group, topic, partitions):
        raise Unsupported("kcat cannot read committed offsets")

    def share_member(self, group, topic, **_):
        raise Unsupported("kcat (librdkafka 2.0) has no share-group consumer (KIP-932)")

    def start_member(self, group, topic):
        return _Member(["kcat", "-b", self.bootstrap, "-u", "-G", group, "-X", "auto.offset.reset=earliest",
                        "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500", "-J", topic])

    def partition_count(self, topic):
        meta = json.loads(self.run(["-L", "-J", "-t", topic]).stdout)
        [found] = meta["topics"]
        if "error" in found:
            raise ClientError(error_code(found["error"]), found["error"])
        return len(found["partitions"])

    def list_topics(self):
        return {t["topic"] for t in json.loads(self.run(["-L", "-J"]).stdout)["topics"]}

    def _no_admin(self, *args, **kwargs):
        raise Unsupported("kcat has no admin operations beyond metadata")

    create_topic = topic_configs = create_partitions = delete_topic = list_groups = describe_group = _no_admin

    def _no_transactions(self, *args, **kwargs):
        raise Unsupported("kcat has no transactional producer")

    transactional_producer = transform = _no_transactions


def _record(item: dict) -> Record:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    flat = item.get("headers") or []
    headers = tuple((flat[i], raw(flat[i + 1])) for i in range(0, len(flat), 2))
    return Record(item["partition"], item["offset"], raw(item["key"]), raw(item["payload"]), headers, item["ts"])


_REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)")


class _Member:
    """A balanced kcat consumer; its stderr tells the assignments (\"% Group g rebalanced ... assigned: t [0]\")."""

    def __init__(self, command: list[str]) -> None:
        # kcat writes the file through its own descriptor; records() reads it through another.
        self._stdout = tempfile.NamedTemporaryFile("w", suffix=".jsonl")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(command, stdout=self._stdout, stderr=subprocess.PIPE, text=True)
        self._assigned: set[int] | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            match = _REBALANCE.search(line)
            if match:
                parts = {int(p) for p in re.findall(r"\[(\d+)\]", match.group(2))}
                held = self._assigned or set()
                self._assigned = held | parts if match.group(1) == "assigned" else held - parts

    def assignment(self):
        return self._assigned

    def records(self):
        with open(self._stdout.name) as f:
            lines = f.read().split("\n")[:-1]  # the last piece may be a line kcat is still writing
        return [_record(json.loads(line)) for line in lines if line.strip()]

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(5)
        self._stdout.close()
