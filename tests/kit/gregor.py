"""The Gregor broker of the test kit: `gregor serve` in a subprocess on a free port, found by the
line it prints once it listens; tests, compat_tests and bench (bench/broker_process.py adds its
/proc readings) start every broker through it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"listening on ([\d.]+):(\d+)")
LISTENER = re.compile(r"gregor listener (\w+)://([\d.]+):(\d+)")
ADMIN = re.compile(r"admin API on http://([\d.]+:\d+)")
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
    source: Path = ROOT  # the checkout whose broker runs (bench/run.py --source compares two)
    command: list[str] | None = None  # what runs `serve` (default: this Python's `-m broker`; bench: a profiler)
    log_level: str | None = "INFO"  # --log-level; None: the broker's default
    admin: str = ""  # "host:port" of the admin HTTP API, once ready, when extra_args ask for one
    _seen: int = 0  # the log's size when the running process was launched (wait_ready reads past it)


    def start(self, timeout: float = 30.0) -> str:
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it (wait_ready): several start side by side."""
        args = [*(self.command or [sys.executable, "-m", "broker"]), "serve", "--data-dir", str(self.data_dir),
                "--host", "127.0.0.1", "--port", str(self.port)]
        if self.log_level is not None:
            args += ["--log-level", self.log_level]
        if self.open_files is not None:  # set by a process that then execs the broker
            args = [sys.executable, "-c", _WITH_OPEN_FILES, *map(str, self.open_files), *args]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        args += self.extra_args
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        added = dict(self.env or {})
        if self.source != ROOT:
            added["PYTHONPATH"] = str(self.source)
        with open(self.log_path, "ab") as log:
            self._seen = self.log_path.stat().st_size
            env = {**os.environ, **added} if added else None
            self.proc = subprocess.Popen(args, cwd=self.source, stdout=log, stderr=log, env=env)
        _running.append(self)

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Until the launched process listens: its address."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[self._seen:].decode(errors="replace")
            match = READY.search(text)
            admin = ADMIN.search(text)
            if match and (admin or "--admin-port" not in self.extra_args):
                self.admin = admin.group(1) if admin else ""
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
