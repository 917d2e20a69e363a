"""A Gregor broker started by the benchmark: start, wait until it listens, read its CPU time
and peak RSS from /proc, stop it with SIGTERM. Only the process started here is ever
signalled, by its PID. MeasuredProcess holds the /proc readings, which bench/kafka_process.py
shares for the Kafka broker beside it.

The process itself is started and stopped by the test kit (tests/kit/gregor.py), as the Kafka
broker beside it is (bench/kafka_process.py). With `profile` set, the broker runs under cProfile
(bench/profiled_broker.py) and writes its stats to that path when it stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the test kit's launcher starts the broker
    sys.path.insert(0, str(ROOT))

from tests.kit.gregor import BrokerProcess as KitBroker  # noqa: E402

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
    """Gregor started by the test kit's launcher (tests/kit/gregor.py), read from /proc."""

    source = ROOT  # where the broker's packages are imported from (bench/run.py --source)
    overrides: ClassVar[dict[str, str]] = {}  # settings every broker of the run gets (the loopback probes' --set)

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None,
                 profile: Path | None = None, admin_api: bool = False) -> None:
        self.data_dir = data_dir
        self.settings = settings or {}
        self.profile = profile
        self.admin_api = admin_api  # also serve the admin HTTP API on a free port
        self.proc: subprocess.Popen | None = None
        self.broker: KitBroker | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        return int(self.broker.bootstrap.rsplit(":", 1)[1]) if self.broker and self.broker.bootstrap else 0

    @property
    def admin(self) -> str:
        """The admin HTTP API's "host:port" once started with admin_api."""
        return self.broker.admin if self.broker else ""

    @property
    def stderr_path(self) -> Path:
        """What the broker printed (stdout and stderr)."""
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = None
        if self.profile is not None:
            command = [sys.executable, str(ROOT / "bench" / "profiled_broker.py"), str(self.profile)]
        self.broker = KitBroker(self.data_dir, {**self.settings, **self.overrides}, source=self.source, command=command,
                                log_level=None, extra_args=["--admin-port", "0"] if self.admin_api else [])
        try:
            self.broker.start(timeout)
        except RuntimeError:
            self.broker.stop(signal.SIGKILL)
            raise RuntimeError(f"broker did not start: {self.last_words()[-2000:]}") from None
        self.proc = self.broker.proc

    def last_words(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:] if self.stderr_path.exists() else ""

    def stop(self, timeout: float = 60.0) -> None:
        if self.broker is not None and self.broker.proc is not None:
            self.broker.stop(signal.SIGTERM, timeout)
