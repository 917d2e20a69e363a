"""The test kit's ZooKeeper: Debian's package (bin/setup-zookeeper), one private server on a free
loopback port, for broker groups (tests/kit/group.py)."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


from tests.kit.gregor import ROOT
from tests.kit.ports import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SESSION_TIMEOUT_MS = 4000  # a dead master is noticed within this (ZooKeeper's tick here: 500 ms)


@dataclass
class ZooKeeperProcess:
    data_dir: Path
    port: int = 0
    proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        self.port = self.port or free_port()
        with open(self.data_dir.parent / "zookeeper.log", "ab") as log:
            self.proc = subprocess.Popen(["bash", "bin/zookeeper", "--port", str(self.port), "--data-dir",
                                          str(self.data_dir), "--tick-ms", "500"], cwd=ROOT, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"ZooKeeper not answering on 127.0.0.1:{self.port} after {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"
