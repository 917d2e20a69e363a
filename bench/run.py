"""Broker benchmark suite: Gregor and a real Apache Kafka (3.9.0, or 4.4.0 with --kafka-version) side by side.

Same machine, same clients, client settings and topic layouts: throughput by message size, consume
with three client configurations, acks x flush mode, partitions (up to 10,000), end-to-end
latency right after a throughput phase, a cold backlog read, broker CPU per GB and peak RSS,
with loopback and file-write baselines from the same run. Every figure is measured --repeat
times; the docs give each broker's median and range and Gregor / Kafka. Rewrites the "Broker
benchmarks" section of docs/benchmarks.md and the plots docs/bench-partitions.png and
docs/bench-latency.png.

Run: .venv/bin/python bench/run.py [--quick] [--repeat N] [--gregor-only | --against-kafka] [--kafka-version V]
                                   [--only CONFIG,...] [--no-docs] [--json PATH]
     .venv/bin/python bench/run.py --bootstrap HOST:PORT   (drive a running broker; no Kafka)
     .venv/bin/python bench/run.py --profile     (cProfile of Gregor's produce and fetch paths)
     .venv/bin/python bench/run.py --from-json PATH   (rewrite the docs from a saved run)

Kafka runs beside Gregor by default when its jars are resolved (bin/setup-kafka); with
--against-kafka a missing Kafka is an error, with --gregor-only it is not started. Every broker
configuration gets a fresh broker of each kind in a temporary directory, deleted afterwards;
within a round the two brokers run one configuration after the other, and the order of the two
alternates between rounds. With --bootstrap the suite drives that broker instead: topics get a
unique prefix, and what needs control of the broker (sync flush, CPU, RSS, restart for a cold
backlog) is skipped. Each client runs in its own process (bench/loadgen.py).
Plots need matplotlib: .venv/bin/pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baselines
import report
import workloads
from broker_process import ROOT, BrokerProcess, MeasuredProcess
from workloads import LOADGEN, Target

CREATE_BATCH_PARTITIONS = 5_000  # per CreateTopics call: Kafka's controller refuses >10,000 records in one
WARM_UP_BYTES = 5 << 28  # 1.25 GiB: past the default 1 GiB first segment


class Suite:
    def __init__(self, args: argparse.Namespace, kafka: bool) -> None:
        self.quick = args.quick
        self.repeat = args.repeat
        self.external = args.bootstrap
        self.brokers = ("gregor", "kafka") if kafka else ("gregor",)
        self.configs = workloads.configs(self.quick, args.only)
        self.seconds = 2.0 if args.quick else 5.0
        self.tmp = Path(tempfile.mkdtemp(prefix="gregor-bench-"))
        self.prefix = f"bench-{uuid.uuid4().hex[:6]}-" if args.bootstrap else ""
        self.results: dict = {"figures": [], "latency_samples": [], "brokers": [], "loadavg_samples": [],
                              "errors": [], "warm_up": []}
        self.live: MeasuredProcess | None = None

    # -- brokers -------------------------------------------------------------

    def start(self, broker: str, config: str, run: int, flush: str = "async", warm_up: bool = True) -> Target:
        prefix = f"{self.prefix}r{run}-" if self.external else ""
        if self.external:
            return Target(broker, run, config, None, self.external, prefix)
        proc = self.new_process(broker, self.tmp / f"{broker}-{config}-r{run}", flush)
        self.live = proc
        started = time.perf_counter()
        proc.start()
        idle = proc.wait_idle()
        print(f"  {broker:6} started in {time.perf_counter() - started:.1f} s ({idle:.1f} s of it waiting "
              "for the broker to go idle)", flush=True)
        target = Target(broker, run, config, proc, proc.bootstrap, prefix)
        if warm_up and not self.quick:
            self.warm_up(target)
        return target

    @staticmethod
    def new_process(broker: str, data_dir: Path, flush: str = "async",
                    settings: dict[str, str] | None = None) -> MeasuredProcess:
        if broker == "kafka":
            import kafka_process
            return kafka_process.KafkaProcess(data_dir, {**kafka_process.settings_for(flush), **(settings or {})})
        return BrokerProcess(data_dir, {"flush.mode": flush, **(settings or {})})

    def warm_up(self, target: Target) -> None:
        """Write past the first segment before measuring, on both brokers alike. A fresh Gregor's
        first commitlog segment is resident before it listens (1 GiB of file-backed RSS); later ones
        fault their pages in on first write. Measuring in the first segment overstated Gregor's
        produce by up to ~40% in a probe. For Kafka it is the JIT's warm-up."""
        topic = "bench-warm-up"
        self.create_topics(target, [topic], 1)
        spec = {"mode": "produce", "bootstrap": target.bootstrap, "topics": [topic], "partitions_per_topic": 1,
                "size": 1024, "acks": "1", "seconds": 60, "max_messages": WARM_UP_BYTES // 1024}
        result = self.client(spec)
        self.results["warm_up"].append({"broker": target.broker, "config": target.config, "run": target.run,
                                        "msgs_per_s": result["msgs_per_s"]})
        target.proc.wait_idle()  # type: ignore[union-attr]

    def finish(self, target: Target, keep_data: bool = False) -> None:
        proc = target.proc
        if proc is None:
            return
        self.check_alive(proc)
        self.results["brokers"].append({"broker": target.broker, "config": target.config, "run": target.run,
                                        "peak_rss_mb": proc.peak_rss_mb(), "anon_rss_mb": proc.anon_rss_mb(),
                                        "cpu_seconds": proc.cpu_seconds()})
        started = time.perf_counter()
        if keep_data:
            proc.stop()
        else:
            proc.discard()
            shutil.rmtree(proc.data_dir, ignore_errors=True)
        print(f"  {target.broker:6} stopped in {time.perf_counter() - started:.1f} s", flush=True)
        self.live = None

    def create_topics(self, target: Target, names: list[str], partitions: int) -> float:
        return create_topics(target.bootstrap, names, partitions)

    # -- clients -------------------------------------------------------------

    def client(self, spec: dict, timeout: float = 300) -> dict:
        """Run one load generator to completion; gives up if the broker under test exits."""
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen([sys.executable, str(LOADGEN), json.dumps(spec)], stdout=out, stderr=err,
                                    text=True, cwd=ROOT)
            deadline = time.monotonic() + timeout
            try:
                while proc.poll() is None:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"loadgen {spec['mode']} did not finish in {timeout:.0f} s")
                    if self.live is not None:
                        self.check_alive(self.live)
                    time.sleep(0.1)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            out.seek(0)
            err.seek(0)
            lines = out.read().strip().splitlines()
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"loadgen {spec['mode']} failed: {err.read()[-2000:]}")
            return json.loads(lines[-1])

    @staticmethod
    def check_alive(proc: MeasuredProcess) -> None:
        code = proc.exit_status()
        if code is not None:
            raise RuntimeError(f"the broker exited with status {code} (a negative status is the signal "
                               f"that ended it); its log: {proc.last_words()}")

    def measured(self, target: Target, spec: dict, timeout: float = 300) -> tuple[dict, float | None]:
        """Run one client; returns its result and the broker CPU seconds it caused."""
        self.results["loadavg_samples"].append(os.getloadavg()[0])
        proc = target.proc
        before = proc.cpu_seconds() if proc else None
        result = self.client(spec, timeout)
        cpu = proc.cpu_seconds() - before if proc and before is not None else None
        return result, cpu

    def record(self, target: Target, workload: str, **metrics) -> None:
        self.results["figures"].append({"workload": workload, "broker": target.broker, "run": target.run,
                                        **metrics})

    # -- the run -------------------------------------------------------------

    def run_baselines(self) -> None:
        total = (256 << 20) if self.quick else (1 << 30)
        self.results["baselines"] = {
            "loopback_mb_per_s": baselines.loopback_mb_per_s(total),
            "file_write_mb_per_s": baselines.file_write_mb_per_s(self.tmp, total),
            "fdatasync_ms": baselines.fdatasync_ms(self.tmp),
        }
        b = self.results["baselines"]
        print(f"baselines: loopback {b['loopback_mb_per_s']:,.0f} MB/s, file write "
              f"{b['file_write_mb_per_s']:,.0f} MB/s, 4 KiB write+fdatasync {b['fdatasync_ms']:.2f} ms", flush=True)

    def run(self) -> dict:
        meta = self.results["meta"] = {
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": self.quick,
            "repeat": self.repeat, "brokers": list(self.brokers), "configs": [name for name, _ in self.configs],
            "target": self.external or "fresh brokers per configuration",
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "python": platform.python_version(), "loadavg_before": os.getloadavg(),
            "source": "external broker" if self.external else _describe_source(BrokerProcess.source)}
        if "kafka" in self.brokers:
            import kafka_process
            meta["kafka"] = f"Apache Kafka {kafka_process.KafkaProcess.version}"
            meta["kafka_sync"] = kafka_process.SYNC_LABEL
        started = time.perf_counter()
        try:
            self.run_baselines()
            for run in range(self.repeat):
                order = self.brokers if run % 2 == 0 else tuple(reversed(self.brokers))
                for name, measure in self.configs:
                    for broker in order:
                        print(f"run {run + 1}/{self.repeat}, {name}, {broker} (at {time.perf_counter() - started:.0f} s,"
                              f" load {os.getloadavg()[0]:.2f})", flush=True)
                        self._guarded(f"run {run + 1}, {name}, {broker}", measure, broker, run)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        meta["loadavg_after"] = os.getloadavg()
        meta["seconds"] = time.perf_counter() - started
        return self.results

    def _guarded(self, title: str, measure, broker: str, run: int) -> None:
        """One broken configuration must not lose the others' figures: report it and go on."""
        try:
            measure(self, broker, run)
        except (RuntimeError, OSError, subprocess.SubprocessError, KafkaException) as exc:
            if self.live is not None and not isinstance(exc, RuntimeError):
                try:  # a client error may be a broker that died: say so, with its log
                    self.check_alive(self.live)
                except RuntimeError as died:
                    exc = died
            print(f"  FAILED: {exc}", flush=True)
            self.results["errors"].append(f"{title}: {exc}")
            if self.live is not None:
                self.live.discard()
                self.live = None


def create_topics(bootstrap: str, names: list[str], partitions: int) -> float:
    """Create the topics, at most CREATE_BATCH_PARTITIONS partitions per CreateTopics call, and wait
    until every partition has a leader; returns the seconds that took."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    per_call = max(1, CREATE_BATCH_PARTITIONS // partitions)
    started = time.perf_counter()
    for i in range(0, len(names), per_call):
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i:i + per_call]],
                                      operation_timeout=120, request_timeout=180)
        for future in futures.values():
            future.result()
    deadline = time.monotonic() + 120
    while not _have_leaders(admin, names, partitions):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(names)} topics of {partitions} partitions had no leaders after 120 s")
        time.sleep(0.1)
    return time.perf_counter() - started


def _have_leaders(admin: AdminClient, names: list[str], partitions: int) -> bool:
    topics = admin.list_topics(timeout=10).topics
    for name in names:
        meta = topics.get(name)
        if meta is None or meta.error is not None or len(meta.partitions) != partitions:
            return False
        if any(p.leader < 0 or p.error is not None for p in meta.partitions.values()):
            return False
    return True


def _describe_source(source: Path) -> str:
    """Which broker code ran: the commit, and whether its broker/store/protocol had local edits."""
    def git(*argv: str) -> str:
        out = subprocess.run(["git", *argv], cwd=source, capture_output=True, text=True, check=False)
        return out.stdout.strip() if out.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit or Path(git("rev-parse", "--show-toplevel") or "/") != source:
        return f"source tree {source}"
    dirty = git("status", "--porcelain", "--", "broker", "store", "protocol")
    return f"commit {commit}" + (" with uncommitted changes in broker/store/protocol" if dirty else "")


def _with_kafka(args: argparse.Namespace, parser: argparse.ArgumentParser) -> bool:
    """Whether Kafka runs beside Gregor: by default when it is installed; --against-kafka insists."""
    if args.gregor_only or args.bootstrap:
        if args.against_kafka:
            parser.error("--against-kafka cannot go with --gregor-only or --bootstrap")
        return False
    try:
        import kafka_process
        reason = kafka_process.unavailable()
    except ImportError as exc:  # e.g. a tree without tests/kit
        reason = f"tests/kit/kafka.py cannot be imported: {exc}"
    if reason is None:
        return True
    if args.against_kafka:
        parser.error(f"--against-kafka, but {reason}")
    print(f"Kafka is not available, measuring Gregor only (bin/setup-kafka resolves it): {reason}",
          file=sys.stderr)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="drive this broker instead of starting brokers (no Kafka beside it)")
    parser.add_argument("--quick", action="store_true",
                        help="2 s phases, 256 MiB backlog, no warm-up (~3-4 min per repeat with Kafka)")
    parser.add_argument("--repeat", type=int, default=3, help="measure every figure this many times (default 3)")
    kafka = parser.add_mutually_exclusive_group()
    kafka.add_argument("--against-kafka", action="store_true",
                       help="run every workload against a real Kafka too; fail if it is not installed")
    kafka.add_argument("--gregor-only", action="store_true", help="do not start Kafka")
    parser.add_argument("--kafka-version", default="3.9.0", choices=["3.9.0", "4.4.0"],
                        help="the Kafka release beside Gregor (bin/setup-kafka resolves both; default 3.9.0)")
    parser.add_argument("--only", help="comma-separated configurations: " + ", ".join(workloads.CONFIG_NAMES))
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md or plots")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--from-json", type=Path, help="rewrite the docs from a saved --json run, run nothing")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="run Gregor from this source tree, e.g. a git archive of a commit")
    parser.add_argument("--profile", action="store_true",
                        help="profile Gregor's produce and fetch paths with cProfile instead")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every Gregor broker of the run (a comparison of one setting); repeatable")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    BrokerProcess.source = args.source.resolve()
    BrokerProcess.overrides = dict(item.split("=", 1) for item in args.set)
    try:
        import kafka_process
        kafka_process.KafkaProcess.version = args.kafka_version
    except ImportError:  # a tree without tests/kit: _with_kafka says so
        pass
    if args.profile:
        import profile_paths
        return profile_paths.main(quick=args.quick)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    else:
        results = Suite(args, _with_kafka(args, parser)).run()
    if args.json:
        args.json.write_text(json.dumps(results))
    print(report.summary(results))
    if not args.no_docs:
        report.write_docs(results, ROOT / "docs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
