"""Real Kafka applications beside a broker: a Kafka Connect worker in distributed mode and the
word-count Kafka Streams application of java/WordCount.java.

Their jars come from Maven Central through tests/apps/pom.xml, resolved by bin/setup-apps into
.cache/kafka-apps/<version>/ (the directory holds `.resolved` once the copy is complete); without
them a test skips naming the artifacts. WordCount.java is compiled at test time into the test's
own temporary directory. Every JVM is a child of this process bound to 127.0.0.1, and only those
are ever signalled, by their PID.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from compat_tests.clients import stop_process
from tests.kit.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
APPS_VERSION = os.environ.get("GREGOR_APPS_VERSION", "3.9.2")
ARTIFACTS = "org.apache.kafka:connect-runtime, connect-file and kafka-streams"
WORD_COUNT = Path(__file__).resolve().parent / "java" / "WordCount.java"
HEAP = ["-Xms64m", "-Xmx512m"]

LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.reflections=ERROR
log4j.logger.org.apache.kafka.clients.consumer.ConsumerConfig=WARN
log4j.logger.org.apache.kafka.clients.producer.ProducerConfig=WARN
log4j.logger.org.apache.kafka.clients.admin.AdminClientConfig=WARN
"""


def apps_libs(version: str = APPS_VERSION) -> Path:
    """The resolved jars; skips the test loudly when bin/setup-apps could not resolve them."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("NOT RUN: java and javac (a JDK 17+) are needed for Kafka Connect and Kafka Streams")
    libs = ROOT / ".cache" / "kafka-apps" / version
    if not (libs / ".resolved").exists():
        log = ROOT / ".cache" / "kafka-apps" / f"{version}.log"
        why = log.read_text(errors="replace")[-600:] if log.exists() else "bin/setup-apps has not run"
        pytest.skip(f"NOT RUN: {ARTIFACTS} {version} are not resolved into {libs} "
                    f"(bin/setup-apps, from Maven Central): {why.strip()}")
    return libs


def _java(libs: Path, log4j: Path, *args: str, classes: Path | None = None) -> list[str]:
    classpath = f"{classes}:{libs}/*" if classes else f"{libs}/*"
    return ["java", *HEAP, "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{log4j}",
            "-cp", classpath, *args]


class ConnectWorker:
    """One Kafka Connect worker in distributed mode, its REST API on a free loopback port. Its
    internal topics are named after its group, with replication factor 1. Offsets are flushed
    every second (Connect's default is a minute)."""

    def __init__(self, libs: Path, work_dir: Path, bootstrap: str, group: str) -> None:
        self.libs = libs
        self.work_dir = work_dir
        self.bootstrap = bootstrap
        self.group = group
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = work_dir / "connect.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _configure(self) -> Path:
        self.port = free_port()
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{self.group}-configs",
            "offset.storage.topic": f"{self.group}-offsets",
            "status.storage.topic": f"{self.group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.flush.interval.ms": "1000",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
        }
        path = self.work_dir / "worker.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        return path

    def start(self, timeout: float = 90.0) -> None:
        """Start the worker and return once its REST API lists connectors (the herder has joined
        its group and read the config topic)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(LOG4J.format(path=self.log_path))
        config = self._configure()
        with open(self.work_dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                _java(self.libs, log4j, "org.apache.kafka.connect.cli.ConnectDistributed", str(config)),
                stdout=out, stderr=subprocess.STDOUT, cwd=self.work_dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Connect worker exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            status, _ = self.rest("GET", "/connectors")
            if status == 200:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Connect worker was not ready within {timeout}s:\n{self.log()[-4000:]}")

    def rest(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        """(HTTP status, decoded JSON body); status 0 when nothing answers yet."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text.decode(errors="replace")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, None

    def create_connector(self, name: str, config: dict[str, str], timeout: float = 30.0) -> None:
        """POST /connectors; a worker still joining or rebalancing answers 409 and is asked again."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.rest("POST", "/connectors", {"name": name, "config": config})
            if status == 201:
                return
            if status != 409 or time.monotonic() > deadline:
                raise AssertionError(f"POST /connectors {name}: {status} {body}\n{self.log()[-3000:]}")
            time.sleep(0.5)

    def running(self, name: str) -> bool:
        """The connector and each of its tasks report RUNNING."""
        status, body = self.rest("GET", f"/connectors/{name}/status")
        if status != 200:
            return False
        states = [body["connector"]["state"]] + [task["state"] for task in body["tasks"]]
        return len(states) > 1 and all(state == "RUNNING" for state in states)

    def stop(self, grace: float = 60.0) -> int | None:
        """SIGTERM (Connect stops its connectors, commits their offsets and leaves the group); the
        exit code, or None when the worker had to be killed after `grace` seconds."""
        return _signal_and_wait(self.proc, signal.SIGTERM, grace)

    def log(self) -> str:
        return _read_logs(self.work_dir / "stdout.log", self.log_path)


def compile_word_count(libs: Path, classes: Path) -> Path:
    """javac WordCount.java against the Kafka Streams jars into `classes`."""
    classes.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", f"{libs}/*", "-d", str(classes),
                             str(WORD_COUNT)], capture_output=True, text=True, timeout=180, check=False)
    if result.returncode != 0:
        raise AssertionError(f"javac {WORD_COUNT.name} failed:\n{result.stdout}{result.stderr}")
    return classes


class WordCountApp:
    """One run of WordCount: started, waited on until it reports RUNNING, stopped by a signal."""

    def __init__(self, libs: Path, classes: Path, work_dir: Path, bootstrap: str, application_id: str,
                 input_topic: str, output_topic: str, guarantee: str = "at_least_once") -> None:
        self.libs = libs
        self.classes = classes
        self.work_dir = work_dir
        self.args = [bootstrap, application_id, input_topic, output_topic, str(work_dir / "state"), guarantee]
        self.proc: subprocess.Popen | None = None
        self.seen = 0  # bytes of stdout.log written by earlier runs
        self.stdout_path = work_dir / "stdout.log"
        self.log_path = work_dir / "streams.log"

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(LOG4J.format(path=self.log_path))
        self.seen = self.stdout_path.stat().st_size if self.stdout_path.exists() else 0
        with open(self.stdout_path, "ab") as out:
            self.proc = subprocess.Popen(_java(self.libs, log4j, "WordCount", *self.args, classes=self.classes),
                                         stdout=out, stderr=subprocess.STDOUT, cwd=self.work_dir)

    def states(self) -> list[str]:
        """The states this run has reported so far."""
        text = self.stdout_path.read_bytes()[self.seen:].decode(errors="replace")
        return [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("STATE ")]

    def wait_running(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.states()
            if "RUNNING" in states:
                return
            if "ERROR" in states or self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"WordCount did not reach RUNNING (states {self.states()}):\n{self.log()[-4000:]}")

    def stop(self, sig: int = signal.SIGTERM, grace: float = 60.0) -> int | None:
        """Signal the app; its exit code, or None when it had to be killed after `grace` seconds."""
        return _signal_and_wait(self.proc, sig, grace)

    def log(self) -> str:
        return _read_logs(self.stdout_path, self.log_path)


def words(lines: list[str]) -> Counter:
    """What WordCount counts in `lines` (Java's split on \\W+, which is ASCII-only)."""
    return Counter(w for line in lines for w in re.split(r"\W+", line.lower(), flags=re.ASCII) if w)


def _signal_and_wait(proc: subprocess.Popen | None, sig: int, grace: float) -> int | None:
    """Signal a JVM we started; its exit code, or None when it had to be killed after `grace` s."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(sig)
    try:
        return proc.wait(grace)
    except subprocess.TimeoutExpired:
        stop_process(proc, grace=1)
        return None


def _read_logs(*paths: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in paths if path.exists())
