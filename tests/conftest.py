"""Shared fixtures: a real Gregor broker in a subprocess, on a free port."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
READY = re.compile(r"listening on ([\d.]+):(\d+)")
LISTENER = re.compile(r"gregor listener (\w+)://([\d.]+):(\d+)")
_WITH_OPEN_FILES = ("import os, resource, sys; "
                    "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2]))); "
                    "os.execv(sys.argv[3], sys.argv[3:])")


@dataclass
class BrokerProcess:
    data_dir: Path
    settings: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    bootstrap: str = ""
    listeners: dict[str, str] = field(default_factory=dict)  # listener name -> "host:port", as printed
    log_path: Path | None = None
    port: int = 0
    open_files: tuple[int, int] | None = None  # (soft, hard) RLIMIT_NOFILE the broker starts with
    extra_args: list[str] = field(default_factory=list)  # more `gregor serve` arguments (--admin-port 0)
    env: dict[str, str] | None = None  # added to the broker's environment (LD_PRELOAD)
    _seen: int = 0  # the log's size when the running process was launched (wait_ready reads past it)


    def start(self, timeout: float = 30.0) -> str:
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (wait_ready): several start side by side."""
        args = [sys.executable, "-m", "broker", "serve", "--data-dir", str(self.data_dir),
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "INFO"]
        if self.open_files is not None:  # set by a process that then execs the broker
            args = [sys.executable, "-c", _WITH_OPEN_FILES, *map(str, self.open_files), *args]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        args += self.extra_args
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        with open(self.log_path, "ab") as log:
            self._seen = self.log_path.stat().st_size
            env = {**os.environ, **self.env} if self.env else None
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=log, env=env)
        _running.append(self)

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Until the launched process listens: its address."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[self._seen:].decode(errors="replace")
            match = READY.search(text)
            if match:
                self.bootstrap = f"{match.group(1)}:{match.group(2)}"
                found = LISTENER.findall(text)  # one line per listener; none without a `listeners` setting
                self.listeners = {name: f"{host}:{port}" for name, host, port in found} or {"PLAINTEXT": self.bootstrap}
                return self.bootstrap
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise RuntimeError(f"broker not ready after {timeout}s:\n{self.log_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self in _running:
            _running.remove(self)
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""


_running: list[BrokerProcess] = []  # started and not stopped yet


@pytest.fixture(autouse=True)
def _no_broker_outlives_its_test():
    """A broker a test started and did not stop (it failed half-way) is stopped when the test ends;
    brokers of module and session fixtures were started before this runs and are left alone."""
    before = list(_running)
    yield
    for broker in [b for b in _running if b not in before]:
        broker.stop(signal.SIGKILL)


@pytest.fixture(autouse=True)
def _key_lookups_wait_for_the_index(monkeypatch):
    """Stores opened in the test process: a key lookup waits until the key index holds what was
    written before it (up to a minute, not the second a broker gives it). The index is built off the
    write path, in a worker process started once a key-indexed topic exists; on a loaded CI machine
    that start took over a second, and tests comparing every key's hits failed on what was not yet
    indexed. Tests of a lookup that answers before the index caught up pass wait_s themselves."""
    import store.store
    monkeypatch.setattr(store.store, "KEY_LOOKUP_WAIT_S", 60.0)


# Test brokers use small segments: each broker preallocates its active and next segment, and a
# suite starts dozens of brokers (the 1 GiB default would need tens of GB of disk). A test that needs
# bigger files sets commitlog.segment.bytes itself and says why.
TEST_SEGMENT_BYTES = str(8 * 1024 * 1024)


def add_users(data_dir: Path, users: list[tuple[str, str, str]]) -> None:
    """SCRAM credentials (name, password, mechanism) written into a data dir before its broker first
    starts, with the CLI an operator uses (`gregor user add`, Kafka's `kafka-storage format --add-scram`)."""
    for user, password, mechanism in users:
        added = subprocess.run([sys.executable, "-m", "broker", "user", "add", user, "--password", password,
                                "--mechanism", mechanism, "--data-dir", str(data_dir)],
                               cwd=ROOT, check=False, capture_output=True, text=True, timeout=60)
        if added.returncode != 0:
            raise RuntimeError(f"`broker user add {user} --mechanism {mechanism}` exited {added.returncode}:\n"
                               f"{added.stdout}{added.stderr}")


def start_broker(tmp: Path, name: str = "data", users: list[tuple[str, str, str]] | None = None,
                 **settings: str) -> BrokerProcess:
    settings.setdefault("commitlog.segment.bytes", TEST_SEGMENT_BYTES)
    broker = BrokerProcess(tmp / name, dict(settings))
    if users:
        add_users(broker.data_dir, users)
    broker.start()
    return broker


@pytest.fixture(scope="session")
def gregor_session(tmp_path_factory) -> BrokerProcess:
    broker = start_broker(tmp_path_factory.mktemp("gregor"), **{"group.initial.rebalance.delay.ms": "0"})
    yield broker
    broker.stop()
    shutil.rmtree(broker.data_dir, ignore_errors=True)


@pytest.fixture
def gregor(gregor_session: BrokerProcess) -> str:
    """Bootstrap address of a shared live broker (unique topic names per test keep tests apart)."""
    if gregor_session.proc.poll() is not None:
        pytest.fail(f"the shared broker died:\n{gregor_session.log()[-4000:]}")
    return gregor_session.bootstrap


@pytest.fixture
def bootstrap(gregor: str) -> str:
    return os.environ.get("GREGOR_BOOTSTRAP") or gregor


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of the test's own, with settings; stopped at the end."""
    started: list[BrokerProcess] = []

    def make(name: str = "data", **settings: str) -> BrokerProcess:
        broker = start_broker(tmp_path, name, **settings)
        started.append(broker)
        return broker

    yield make
    for broker in started:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


_counter = iter(range(1_000_000))


@pytest.fixture
def topic_name(request) -> str:
    base = re.sub(r"[^a-zA-Z0-9]", "-", request.node.name)[:80]
    return f"{base}-{os.getpid()}-{next(_counter)}"


