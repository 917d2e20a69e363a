"""A real Apache Kafka broker for bench/run.py (3.9.0, or the release `--kafka-version` names:
4.4.0), measured like Gregor (bench/broker_process.py).

The process itself is started and stopped by tests/kit/kafka.py (single-node KRaft on
free loopback ports, jars from `bin/setup-kafka`); this wraps it with the suite's /proc readings.
Its settings are Kafka's defaults, except that Gregor's flush.mode=sync maps to
log.flush.interval.messages=1: Kafka fsyncs the partition's log after every append.
"""

from __future__ import annotations

import sys
from pathlib import Path

from broker_process import ROOT, MeasuredProcess

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.kit.kafka import KAFKA_VERSION, KafkaBroker, KafkaUnavailable, kafka_libs

SYNC_FLUSH = {"log.flush.interval.messages": "1"}
SYNC_LABEL = "log.flush.interval.messages=1 (fsync after every append)"


def unavailable() -> str | None:
    """Why Kafka cannot run here, or None when its jars are resolved."""
    try:
        kafka_libs(KafkaProcess.version)
    except KafkaUnavailable as exc:
        return str(exc)
    return None


def settings_for(flush: str) -> dict[str, str]:
    """Kafka's settings for one of Gregor's flush modes: defaults for async, an fsync per append for sync."""
    return dict(SYNC_FLUSH) if flush == "sync" else {}


class KafkaProcess(MeasuredProcess):
    version = KAFKA_VERSION  # bench/run.py --kafka-version sets another release

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.kafka = KafkaBroker(data_dir, settings, version=self.version)

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def start(self) -> None:
        """Format (once: a restart keeps the data), start, and return once the coordinators answer."""
        self.kafka.start()
        self.proc = self.kafka.proc

    def last_words(self) -> str:
        return self.kafka.log()[-3000:]

    def stop(self) -> None:
        self.kafka.stop()

    def discard(self) -> None:
        """SIGKILL, by the PID it was started with: a clean shutdown closes and checkpoints every
        partition's log (24 s at 10,000 partitions in a probe) for data deleted right after."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.kafka.stop()  # only its bookkeeping now: the process has exited
