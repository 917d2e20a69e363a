"""A Gregor broker started by the benchmark: start, wait until it listens, read its CPU time
and peak RSS from /proc, stop it with SIGTERM. Only the process started here is ever
signalled, by its PID. MeasuredProcess holds the /proc readings, which bench/kafka_process.py
shares for the Kafka broker beside it.

With `profile` set, the broker runs under cProfile (bench/profiled_broker.py) and writes
its stats to that path when it stops.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(stat: Path) -> float:
    """utime + stime from a /proc stat file (a process's, or one thread's under task/)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class MeasuredProcess:
    """A broker process the suite started, read from /proc by its PID."""

    proc: subprocess.Popen | None = None
    data_dir: Path

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def discard(self) -> None:
        """Stop a broker whose data is thrown away next."""
        self.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def exit_status(self) -> int | None:
        """None while it runs; its exit status once it has exited."""
        return self.proc.poll() if self.proc is not None else None

    def last_words(self) -> str:
        """The end of its log, to say why it exited."""
        raise NotImplementedError

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process (all its threads)."""
        return stat_cpu_seconds(Path(f"/proc/{self.pid}/stat"))

    def peak_rss_mb(self) -> float:
        """VmHWM: peak resident set, including the mmap'd files the broker touched (Gregor's segments)."""
        return self._status_mb("VmHWM:")

    def anon_rss_mb(self) -> float:
        """RssAnon now: the broker's own memory (Python's heap, or the JVM's), without file-backed pages."""
        return self._status_mb("RssAnon:")

    def _status_mb(self, field: str) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return float("nan")

    def written_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
        return 0

    def wait_idle(self, timeout: float = 60.0) -> float:
        """Wait until the broker stops writing and burning CPU (segment pre-allocation and
        pre-zeroing after start, a new topic's files); returns the seconds waited."""
        start = time.monotonic()
        quiet = 0
        last = (self.cpu_seconds(), self.written_bytes())
        while time.monotonic() - start < timeout and quiet < 3:
            time.sleep(0.25)
            now = (self.cpu_seconds(), self.written_bytes())
            quiet = quiet + 1 if now[0] - last[0] < 0.03 and now[1] - last[1] < (1 << 20) else 0
            last = now
        return time.monotonic() - start


class BrokerProcess(MeasuredProcess):
    source = ROOT  # where the broker's packages are imported from (bench/run.py --source)

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None,
                 profile: Path | None = None, admin_api: bool = False) -> None:
        self.data_dir = data_dir
        self.settings = settings or {}
        self.profile = profile
        self.admin_api = admin_api  # also serve the admin HTTP API on a free port
        self.admin = ""  # its "host:port" once started
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.stderr_path = data_dir.parent / f"{data_dir.name}.stderr"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable]
        if self.profile is not None:
            cmd += [str(ROOT / "bench" / "profiled_broker.py"), str(self.profile)]
        else:
            cmd += ["-m", "broker"]
        cmd += ["serve", "--data-dir", str(self.data_dir), "--host", "127.0.0.1", "--port", "0"]
        if self.admin_api:
            cmd += ["--admin-port", "0"]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        with open(self.stderr_path, "wb") as err:
            env = {**os.environ, "PYTHONPATH": str(self.source)}
            self.proc = subprocess.Popen(cmd, cwd=self.source, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.stderr_path.read_bytes()
            found = re.search(rb"listening on 127\.0\.0\.1:(\d+)", log)
            admin = re.search(rb"admin API on http://(127\.0\.0\.1:\d+)", log)
            if found and (admin or not self.admin_api):
                self.port = int(found.group(1))
                self.admin = admin.group(1).decode() if admin else ""
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"broker did not start: {self.stderr_path.read_text(errors='replace')[-2000:]}")

    def last_words(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
