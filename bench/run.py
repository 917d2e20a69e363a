"""Broker benchmark suite: throughput, partitions, acks x flush mode, end-to-end latency,
backlog reads, broker CPU per GB and peak RSS, with loopback and file-write baselines
from the same run. Rewrites the "Broker benchmarks" section of docs/benchmarks.md and the
plots docs/bench-partitions.png and docs/bench-latency.png.

Run: .venv/bin/python bench/run.py [--bootstrap HOST:PORT] [--quick] [--no-docs] [--json PATH]
     .venv/bin/python bench/run.py --profile     (cProfile of the produce and fetch paths)
     .venv/bin/python bench/run.py --from-json PATH   (rewrite the docs from a saved run)

By default every configuration gets a fresh Gregor in a temporary directory, deleted
afterwards. With --bootstrap the suite drives that broker instead: topics get a unique
prefix, and what needs control of the broker (sync flush, CPU, RSS, restart for a cold
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

import numpy as np
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baselines
import report
from broker_process import ROOT, BrokerProcess

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
SIZES = (100, 1024, 16384)
PARTITION_COUNTS = (1, 100, 1_000, 10_000)
TOPIC_PARTITION_LIMIT = 1_000  # larger counts are split over topics of this many partitions
WARM_UP_BYTES = 5 << 28  # 1.25 GiB: past the default 1 GiB first segment


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.quick = args.quick
        self.external = args.bootstrap
        self.seconds = 2.0 if args.quick else 5.0
        self.tmp = Path(tempfile.mkdtemp(prefix="gregor-bench-"))
        self.prefix = f"bench-{uuid.uuid4().hex[:6]}-" if args.bootstrap else ""
        self.results: dict = {"throughput": [], "partitions": [], "latency": [], "backlog": None,
                              "brokers": [], "loadavg_samples": [], "errors": [], "warm_up": []}
        self.live: BrokerProcess | None = None

    # -- brokers -------------------------------------------------------------

    def broker(self, name: str, settings: dict[str, str] | None = None,
               warm_up: bool = True) -> BrokerProcess | None:
        if self.external:
            return None
        proc = BrokerProcess(self.tmp / name, settings)
        self.live = proc
        proc.start()
        proc.wait_idle()
        if warm_up and not self.quick:
            self.warm_up(name, proc)
        return proc

    def warm_up(self, name: str, proc: BrokerProcess) -> None:
        """Write past the first commitlog segment before measuring. A fresh broker's first segment
        is resident before it listens (1 GiB of file-backed RSS, ~3.5 s of CPU at start); later ones
        fault their pages in on first write, on the event loop. Measuring in the first segment
        overstated produce by up to ~40% in a probe."""
        topic = "bench-warm-up"
        self.create_topics(proc.bootstrap, [topic], 1)
        spec = {"mode": "produce", "bootstrap": proc.bootstrap, "topics": [topic], "partitions_per_topic": 1,
                "size": 1024, "acks": "1", "seconds": 60, "max_messages": WARM_UP_BYTES // 1024}
        result = self.client(spec)
        self.results["warm_up"].append({"broker": name, "msgs_per_s": result["msgs_per_s"]})
        proc.wait_idle()

    def bootstrap(self, proc: BrokerProcess | None) -> str:
        return self.external or proc.bootstrap  # type: ignore[union-attr]

    def finish(self, name: str, proc: BrokerProcess | None, keep_data: bool = False) -> None:
        if proc is None:
            return
        self._check_alive(proc)
        self.results["brokers"].append({"name": name, "peak_rss_mb": proc.peak_rss_mb(),
                                        "anon_rss_mb": proc.anon_rss_mb(), "cpu_seconds": proc.cpu_seconds()})
        proc.stop()
        self.live = None
        if not keep_data:
            shutil.rmtree(proc.data_dir, ignore_errors=True)

    def create_topics(self, bootstrap: str, names: list[str], partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=120,
                                      request_timeout=180)
        for future in futures.values():
            future.result()
        del admin

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
                        self._check_alive(self.live)
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
    def _check_alive(proc: BrokerProcess) -> None:
        code = proc.proc.poll() if proc.proc else None
        if code is not None:
            raise RuntimeError(f"the broker exited with status {code} (a negative status is the signal "
                               f"that ended it); its stderr: {proc.stderr_path.read_text(errors='replace')[-3000:]}")

    def measured(self, proc: BrokerProcess | None, spec: dict) -> tuple[dict, float | None]:
        """Run one client; returns its result and the broker CPU seconds it caused."""
        self.results["loadavg_samples"].append(os.getloadavg()[0])
        before = proc.cpu_seconds() if proc else None
        result = self.client(spec)
        cpu = proc.cpu_seconds() - before if proc else None
        return result, cpu

    def throughput(self, proc, bootstrap: str, topics: list[str], per_topic: int, size: int,
                   acks: str, flush: str, consume: bool) -> dict:
        limit = int((3 << 30) / size)  # never more than 3 GiB per phase
        spec = {"mode": "produce", "bootstrap": bootstrap, "topics": topics, "partitions_per_topic": per_topic,
                "size": size, "acks": acks, "seconds": self.seconds, "max_messages": limit}
        produced, cpu = self.measured(proc, spec)
        row = {"size": size, "partitions": per_topic * len(topics), "acks": acks, "flush": flush,
               "produce": produced, "produce_cpu_s_per_gb": _per_gb(cpu, produced["delivered"] * size),
               "produce_broker_busy": cpu / produced["seconds"] if cpu is not None else None}
        if consume:
            spec = {"mode": "consume", "bootstrap": bootstrap, "topics": topics, "partitions_per_topic": per_topic,
                    "expected": produced["delivered"], "seconds": 10 if self.quick else 30,
                    "partition_fetch_bytes": max(1_048_576, 4 * size), "group": f"g-{uuid.uuid4().hex[:8]}"}
            consumed, cpu = self.measured(proc, spec)
            row["consume"] = consumed
            row["consume_cpu_s_per_gb"] = _per_gb(cpu, consumed["bytes"])
            row["consume_broker_busy"] = cpu / consumed["seconds_with_connect"] if cpu is not None else None
        print(f"  {flush:5} acks={acks:3} {size:>6} B x {row['partitions']:>6} partitions: "
              f"produce {produced['msgs_per_s']:>10,.0f} msg/s"
              + (f", consume {row['consume']['msgs_per_s']:>10,.0f} msg/s" if consume else ""), flush=True)
        return row

    # -- workloads -----------------------------------------------------------

    def run_sizes_and_acks(self) -> None:
        for flush in ("async", "sync"):
            if flush == "sync" and self.external:
                continue
            proc = self.broker(f"sizes-{flush}", {"flush.mode": flush})
            bootstrap = self.bootstrap(proc)
            sizes = SIZES if flush == "async" else (1024,)
            for size in sizes:
                for acks in ("1", "all"):
                    if acks == "all" and size != 1024:
                        continue
                    topic = f"{self.prefix}s{size}-{flush}-{acks}"
                    self.create_topics(bootstrap, [topic], 1)
                    row = self.throughput(proc, bootstrap, [topic], 1, size, acks, flush,
                                          consume=(flush == "async" and acks == "1"))
                    self.results["throughput"].append(row)
            self.finish(f"sizes-{flush}", proc)
            # Latency on a broker of its own in both modes, once the warm-up's writes have reached
            # the disk: measured on the broker that had just written the throughput phases'
            # gigabytes, the sync figure was the kernel's writeback of those (fdatasync queued
            # behind it: p99 0.6-1.8 s), not a steady 2,000 msg/s (p99 3.8-5.0 ms on a fresh one).
            proc = self.broker(f"latency-{flush}", {"flush.mode": flush})
            os.sync()
            self.latency_ladder(proc, self.bootstrap(proc), flush)
            self.finish(f"latency-{flush}", proc)

    def run_partitions(self) -> None:
        for count in PARTITION_COUNTS:
            proc = self.broker(f"partitions-{count}")
            bootstrap = self.bootstrap(proc)
            per_topic = min(count, TOPIC_PARTITION_LIMIT)
            topics = [f"{self.prefix}p{count}-{i}" for i in range(count // per_topic)]
            started = time.perf_counter()
            self.create_topics(bootstrap, topics, per_topic)
            create_s = time.perf_counter() - started
            if proc:
                proc.wait_idle()
            row = self.throughput(proc, bootstrap, topics, per_topic, 1024, "1", "async", consume=True)
            row["create_seconds"] = create_s
            self.results["partitions"].append(row)
            self.finish(f"partitions-{count}", proc)

    def latency_ladder(self, proc, bootstrap: str, flush: str) -> None:
        """The target rate, then (full runs) lower rates to show where the latency bends."""
        self.latency(proc, bootstrap, flush, 2_000, 5 if self.quick else 15)
        if not self.quick:
            for rate in (250, 1_000):
                self.latency(proc, bootstrap, flush, rate, 6)

    def latency(self, proc, bootstrap: str, flush: str, rate: int, seconds: int) -> None:
        count = rate * seconds
        topic = f"{self.prefix}latency-{flush}-{rate}"
        self.create_topics(bootstrap, [topic], 1)
        base = {"bootstrap": bootstrap, "topics": [topic], "partitions_per_topic": 1, "size": 1024,
                "count": count, "rate": rate, "acks": "1"}
        consumer = subprocess.Popen([sys.executable, str(LOADGEN), json.dumps(
            {**base, "mode": "latency-consume", "seconds": seconds + 30, "group": f"g-{uuid.uuid4().hex[:8]}"})],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            ready = consumer.stdout.readline().strip()  # type: ignore[union-attr]
            if ready != "ready":
                raise RuntimeError(f"latency consumer: {consumer.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            cpu = proc.cpu_seconds() if proc else None
            sent = self.client({**base, "mode": "latency-produce"}, timeout=seconds + 60)
            busy = (proc.cpu_seconds() - cpu) / sent["seconds"] if proc else None
            out, _err = consumer.communicate(timeout=seconds + 60)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
        got = json.loads(out.strip().splitlines()[-1])
        warmup = min(rate // 2, len(got["latency_us"]) // 10)
        lat_ms = np.array(got["latency_us"][warmup:], dtype=np.float64) / 1000
        p50, p99, p999 = (float(np.percentile(lat_ms, q)) for q in (50, 99, 99.9))
        self.results["latency"].append({"flush": flush, "rate": rate, "sent": sent["sent"],
                                        "achieved_rate": sent["achieved_rate"], "received": got["received"],
                                        "broker_busy": busy,
                                        "samples": len(lat_ms), "p50_ms": p50, "p99_ms": p99, "p999_ms": p999,
                                        "max_ms": float(lat_ms.max()), "latency_ms": lat_ms.tolist()})
        print(f"  latency {flush:5} at {rate:5} msg/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms, p999 {p999:.2f} ms "
              f"({len(lat_ms)} samples)", flush=True)

    def run_backlog(self) -> None:
        total = (256 << 20) if self.quick else (1 << 30)
        size = 1024
        count = total // size
        proc = self.broker("backlog", warm_up=False)
        bootstrap = self.bootstrap(proc)
        topic = f"{self.prefix}backlog"
        self.create_topics(bootstrap, [topic], 1)
        written, _ = self.measured(proc, {"mode": "produce", "bootstrap": bootstrap, "topics": [topic],
                                          "partitions_per_topic": 1, "size": size, "acks": "1",
                                          "seconds": 300, "max_messages": count})
        cache = "warm (broker not restarted: --bootstrap)"
        if proc is not None:
            self.finish("backlog-write", proc, keep_data=True)
            cache = _drop_page_cache()
            # Without the startup CRC check: it reads the whole log through the mapping before
            # the broker listens, so the consumer would read from memory after all.
            proc = BrokerProcess(proc.data_dir, {"commitlog.verify.on.start": "false"})
            self.live = proc
            proc.start()
            bootstrap = proc.bootstrap
        read, cpu = self.measured(proc, {"mode": "consume", "bootstrap": bootstrap, "topics": [topic],
                                         "partitions_per_topic": 1, "expected": written["delivered"],
                                         "seconds": 300, "group": f"g-{uuid.uuid4().hex[:8]}"})
        self.results["backlog"] = {"bytes": written["delivered"] * size, "write": written, "read": read,
                                   "cache": cache, "read_cpu_s_per_gb": _per_gb(cpu, read["bytes"])}
        print(f"  backlog {written['delivered'] * size / 2**30:.2f} GiB ({cache}): "
              f"read {read['msgs_per_s']:,.0f} msg/s, {read['mb_per_s']:.0f} MB/s", flush=True)
        self.finish("backlog-read", proc)

    def run_baselines(self) -> None:
        total = (256 << 20) if self.quick else (1 << 30)
        self.results["baselines"] = {
            "loopback_mb_per_s": baselines.loopback_mb_per_s(total),
            "file_write_mb_per_s": baselines.file_write_mb_per_s(self.tmp, total),
            "fdatasync_ms": baselines.fdatasync_ms(self.tmp),
        }
        b = self.results["baselines"]
        print(f"  baselines: loopback {b['loopback_mb_per_s']:,.0f} MB/s, file write "
              f"{b['file_write_mb_per_s']:,.0f} MB/s, 4 KiB write+fdatasync {b['fdatasync_ms']:.2f} ms",
              flush=True)

    def run(self) -> dict:
        meta = self.results["meta"] = {
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": self.quick,
            "target": self.external or "fresh Gregor per configuration",
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "python": platform.python_version(), "loadavg_before": os.getloadavg(),
            "source": "external broker" if self.external else _describe_source(BrokerProcess.source)}
        started = time.perf_counter()
        try:
            for title, phase in (("baselines", self.run_baselines),
                                 ("message sizes, acks x flush mode, latency", self.run_sizes_and_acks),
                                 ("partitions", self.run_partitions), ("backlog", self.run_backlog)):
                print(f"{title} (at {time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.2f})",
                      flush=True)
                try:
                    phase()
                except (RuntimeError, OSError, subprocess.SubprocessError, KafkaException) as exc:
                    # Report what ran; one broken configuration must not lose the others' figures.
                    if self.live is not None and not isinstance(exc, RuntimeError):
                        try:  # a client error may be a broker that died: say so, with its stderr
                            self._check_alive(self.live)
                        except RuntimeError as died:
                            exc = died
                    print(f"  FAILED: {exc}", flush=True)
                    self.results["errors"].append(f"{title}: {exc}")
                    if self.live is not None:
                        self.live.stop()
                        self.live = None
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        meta["loadavg_after"] = os.getloadavg()
        meta["seconds"] = time.perf_counter() - started
        return self.results


def _per_gb(cpu: float | None, nbytes: int) -> float | None:
    return cpu / (nbytes / 1e9) if cpu is not None and nbytes else None


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


def _drop_page_cache() -> str:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        return f"warm (drop_caches refused: {exc.strerror})"
    return "cold (page cache dropped, no CRC check at start)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="drive this broker instead of starting Gregor")
    parser.add_argument("--quick", action="store_true", help="shorter phases, 256 MiB backlog (~3 min)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md or plots")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--from-json", type=Path, help="rewrite the docs from a saved --json run, run nothing")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="run the broker from this source tree, e.g. a git archive of a commit")
    parser.add_argument("--profile", action="store_true",
                        help="profile Gregor's produce and fetch paths with cProfile instead")
    args = parser.parse_args()
    BrokerProcess.source = args.source.resolve()
    if args.profile:
        import profile_paths
        return profile_paths.main(quick=args.quick)
    results = json.loads(args.from_json.read_text()) if args.from_json else Suite(args).run()
    if args.json:
        args.json.write_text(json.dumps(results))
    print(report.summary(results))
    if not args.no_docs:
        report.write_docs(results, ROOT / "docs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
