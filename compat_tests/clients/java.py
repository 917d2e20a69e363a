"""Runs the Java Kafka client harness (tests/clients/java/GregorJavaClient.java) as a subprocess.

bin/setup-clients fetches the kafka-clients jars and compiles the harness into .cache/java/;
this module only finds them, reruns that script when the harness source changed, and parses
the harness's one-JSON-object-per-line output. It never judges the broker's answers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests/clients/java/GregorJavaClient.java"
LIBS = REPO / ".cache/java/libs"
CLASSES = REPO / ".cache/java/classes"
# Short-lived JVMs: start fast on a small machine rather than run fast.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


class JavaClientError(Exception):
    """The harness exited non-zero or hung; carries what it printed before that."""

    def __init__(self, message: str, records: list[dict], stderr: str) -> None:
        super().__init__(message)
        self.records = records
        self.stderr = stderr


def _compiled_source_is_current() -> bool:
    stamp = CLASSES / ".source-sha256"
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == digest


@functools.cache
def java_available() -> tuple[bool, str]:
    """Whether the harness can run; otherwise the reason, for a loud pytest.skip."""
    if shutil.which("java") is None:
        return False, "java not on PATH (install a JRE/JDK 11+, then run bin/setup-clients)"
    setup_output = ""
    if not _compiled_source_is_current() or not any(LIBS.glob("kafka-clients-*.jar")):
        setup = subprocess.run(
            ["bash", str(REPO / "bin/setup-clients")],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
        )
        setup_output = setup.stderr.strip()
    if not any(LIBS.glob("kafka-clients-*.jar")):
        return False, f"kafka-clients jars missing from {LIBS} after bin/setup-clients: {setup_output}"
    if not _compiled_source_is_current():
        return False, f"harness did not compile into {CLASSES} (bin/setup-clients said: {setup_output})"
    return True, ""


def require_java() -> None:
    """Skip the calling test, loudly, when the harness cannot run."""
    ok, reason = java_available()
    if not ok:
        pytest.skip(f"Java Kafka client harness unavailable: {reason}")


def kafka_clients_version() -> str:
    """The kafka-clients version the harness runs, e.g. '3.9.0'."""
    jar = next(LIBS.glob("kafka-clients-*.jar"))
    return jar.stem.removeprefix("kafka-clients-")


def java_command(args: list[str], log_level: str = "warn") -> list[str]:
    classpath = f"{CLASSES}:{LIBS}/*"
    return [
        "java",
        *JVM_FLAGS,
        f"-Dgregor.log.level={log_level}",
        "-cp",
        classpath,
        "GregorJavaClient",
        *args,
    ]


def run_java(args: list[str], timeout: float = 60.0, log_level: str = "warn") -> list[dict]:
    """Run the harness with `args` (e.g. ["produce", "--bootstrap", b, ...]) and return its JSON lines.

    `timeout` (seconds) bounds the whole process; give the harness its own, shorter
    `--timeout-ms` so it reports a client error instead of being killed.
    Raises JavaClientError on a non-zero exit or a timeout.
    """
    try:
        proc = subprocess.run(
            java_command(args, log_level),
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise JavaClientError(f"java harness {args[:2]} still running after {timeout}s", _parse(out), err)
    records = _parse(proc.stdout)
    if proc.returncode != 0:
        raise JavaClientError(
            f"java harness {args[:2]} exited {proc.returncode}: {_last_error(proc.stderr)}",
            records,
            proc.stderr,
        )
    return records


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
