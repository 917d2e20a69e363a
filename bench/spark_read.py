"""Spark Structured Streaming read rate: Gregor beside a real Apache Kafka 3.9 (issue 17).

One Spark query, the same on both brokers: Spark's Kafka source (`subscribe`, `startingOffsets`
earliest) reads a 4-partition topic of identical records, takes `length(value)` and `partition`,
and writes them to the `noop` sink with `trigger(availableNow=True)` and a fresh checkpoint. The
figure is records/s over the wall time from `start()` to `awaitTermination()`, the records counted
from the query's own progress (sum of numInputRows, which must equal the records loaded); Spark's
processedRowsPerSecond (median over the query's batches) is reported beside it.

Each round starts a fresh broker of each kind in a temporary directory (deleted afterwards), the
two one after the other and their order alternating between rounds, as bench/run.py does. Each
broker gets the same records from one confluent-kafka producer process (bench/loadgen.py), then
one untimed warm-up query that reads the whole topic, then the timed query. One SparkSession
(local[2], spark_examples/connector.py) serves the whole run. Rewrites the "Spark Structured
Streaming read rate (issue 17)" section of docs/benchmarks.md.

Run: .venv/bin/python bench/spark_read.py [--quick] [--repeat N] [--records N] [--gregor-only]
                                          [--no-docs] [--json PATH] [--from-json PATH] [--source DIR]
Needs Spark's Kafka connector (bin/setup-spark) and, for Kafka, bin/setup-kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, length

sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures
from broker_process import ROOT, BrokerProcess, MeasuredProcess
from docs_section import replace_section
from report import _s, _x
from run import Suite, _describe_source, create_topics

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from spark_examples.connector import ConnectorUnavailable, connector_jars, spark_session

START, END = "<!-- spark_read:start -->", "<!-- spark_read:end -->"
TOPIC = "spark-read"
PARTITIONS = 4
VALUE_BYTES = 200
RECORDS, QUICK_RECORDS = 10_000_000, 1_000_000
WORKLOAD = "spark-read"
LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
QUERY_TIMEOUT = 600.0  # seconds; a query that takes longer is reported as failed


class SparkRead:
    def __init__(self, spark: SparkSession, brokers: tuple[str, ...], records: int, repeat: int, quick: bool) -> None:
        self.spark = spark
        self.brokers = brokers
        self.records = records
        self.repeat = repeat
        self.quick = quick
        self.tmp = Path()  # the run's temporary directory, made by run()
        self.results: dict = {"figures": [], "warm_up": [], "loads": [], "errors": []}

    def run(self) -> dict:
        meta = self.results["meta"] = {
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": self.quick,
            "repeat": self.repeat, "records": self.records, "value_bytes": VALUE_BYTES, "partitions": PARTITIONS,
            "brokers": list(self.brokers), "source": _describe_source(BrokerProcess.source),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "python": platform.python_version(), "spark": self.spark.version,
            "connector": [Path(p).name for p in connector_jars()], "java": _java_version(),
            "spark_master": self.spark.sparkContext.master, "loadavg_before": os.getloadavg()}
        if "kafka" in self.brokers:
            import kafka_process
            meta["kafka"] = f"Apache Kafka {kafka_process.KafkaProcess.version}"
        started = time.perf_counter()
        self.tmp = Path(tempfile.mkdtemp(prefix="gregor-spark-read-"))
        try:
            for run in range(self.repeat):
                order = self.brokers if run % 2 == 0 else tuple(reversed(self.brokers))
                for broker in order:
                    print(f"run {run + 1}/{self.repeat}, {broker} (at {time.perf_counter() - started:.0f} s, "
                          f"load {os.getloadavg()[0]:.2f})", flush=True)
                    self._guarded(broker, run, order)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        meta["loadavg_after"] = os.getloadavg()
        meta["seconds"] = time.perf_counter() - started
        return self.results

    def _guarded(self, broker: str, run: int, order: tuple[str, ...]) -> None:
        """A failed round of one broker must not lose the other figures: report it and go on."""
        try:
            self.measure(broker, run, order)
        except (RuntimeError, OSError, subprocess.SubprocessError, KafkaException, PySparkException,
                Py4JError) as exc:
            print(f"  FAILED: {exc}", flush=True)
            self.results["errors"].append(f"run {run + 1}, {broker}: {exc}")

    def measure(self, broker: str, run: int, order: tuple[str, ...]) -> None:
        proc = Suite.new_process(broker, self.tmp / f"{broker}-r{run}")
        try:
            proc.start()
            proc.wait_idle()
            create_topics(proc.bootstrap, [TOPIC], PARTITIONS)
            loaded = self.load(proc)
            os.sync()  # both brokers' data written back before reading, not during the reads
            proc.wait_idle()
            warm_up = self.read(proc, f"{broker}-r{run}-warm-up")
            timed = self.read(proc, f"{broker}-r{run}")
            Suite.check_alive(proc)
        finally:
            proc.discard()
            shutil.rmtree(proc.data_dir, ignore_errors=True)
        for name, result in (("warm-up", warm_up), ("timed", timed)):
            if result["rows"] != self.records:
                raise RuntimeError(f"the {name} query read {result['rows']:,} records, {self.records:,} were loaded")
        self.results["loads"].append({"broker": broker, "run": run, **loaded})
        self.results["warm_up"].append({"broker": broker, "run": run, **warm_up})
        self.results["figures"].append({"workload": WORKLOAD, "broker": broker, "run": run,
                                        "first": order[0] == broker, **timed})
        print(f"  {broker:6} {timed['records_per_s']:,.0f} records/s ({timed['rows']:,} in {timed['seconds']:.2f} s; "
              f"warm-up {warm_up['records_per_s']:,.0f}); Spark's processedRowsPerSecond "
              f"{timed['spark_rows_per_s']:,.0f}", flush=True)

    def load(self, proc: MeasuredProcess) -> dict:
        """The same records into either broker: one producer process, round-robin over the partitions."""
        spec = {"mode": "produce", "bootstrap": proc.bootstrap, "topics": [TOPIC],
                "partitions_per_topic": PARTITIONS, "size": VALUE_BYTES, "acks": "1", "seconds": 0,
                "min_messages": self.records, "max_messages": self.records, "max_seconds": 600}
        out = subprocess.run([sys.executable, str(LOADGEN), json.dumps(spec)], capture_output=True, text=True,
                             cwd=ROOT, timeout=660, check=False)
        Suite.check_alive(proc)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            raise RuntimeError(f"loading failed: {out.stderr[-2000:]}")
        result = json.loads(lines[-1])
        stored = _high_watermarks(proc.bootstrap)
        if result["delivered"] != self.records or stored != self.records:
            raise RuntimeError(f"loading: {result['delivered']:,} delivered and {stored:,} in the topic, "
                               f"{self.records:,} wanted")
        return {"msgs_per_s": result["msgs_per_s"], "seconds": result["seconds"]}

    def read(self, proc: MeasuredProcess, name: str) -> dict:
        """One availableNow query over the whole topic into the noop sink, timed from start() to its end."""
        checkpoint = self.tmp / "checkpoints" / name
        load = os.getloadavg()[0]
        started = time.perf_counter()
        query = (self.spark.readStream.format("kafka")
                 .option("kafka.bootstrap.servers", proc.bootstrap)
                 .option("subscribe", TOPIC)
                 .option("startingOffsets", "earliest")
                 .load()
                 .select(length(col("value")).alias("value_bytes"), col("partition"))
                 .writeStream.format("noop")
                 .queryName(name.replace("-", "_"))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True)
                 .start())
        finished = query.awaitTermination(QUERY_TIMEOUT)
        seconds = time.perf_counter() - started
        if not finished:
            query.stop()
            raise RuntimeError(f"query {name} did not finish in {QUERY_TIMEOUT:.0f} s")
        progress = query.recentProgress
        batches = [p for p in progress if p.numInputRows > 0]
        rows = sum(p.numInputRows for p in progress)
        phases: dict[str, float] = {}
        for p in batches:
            for phase, ms in p.durationMs.items():
                phases[phase] = phases.get(phase, 0.0) + ms / 1000
        return {"rows": rows, "seconds": seconds, "phase_seconds": phases, "add_batch_seconds": phases.get("addBatch"), "records_per_s": rows / seconds, "batches": len(batches),
                "batch_seconds": sum(p.durationMs.get("triggerExecution", 0) for p in batches) / 1000,
                "spark_rows_per_s": statistics.median(p.processedRowsPerSecond for p in batches) if batches else None,
                "loadavg": load}


def _high_watermarks(bootstrap: str) -> int:
    """Records in the topic, summed over its partitions."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-read-check", "log_level": 4})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                   for p in range(PARTITIONS))
    finally:
        consumer.close()


def _java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return (out.stderr.splitlines() or ["unknown"])[0].replace('"', "")


# -- report --------------------------------------------------------------------


def markdown(results: dict) -> str:
    meta = results["meta"]
    kafka = "kafka" in meta["brokers"]
    flags = (" --quick" if meta["quick"] else "") + f" --repeat {meta['repeat']}"
    default = QUICK_RECORDS if meta["quick"] else RECORDS
    flags += "" if meta["records"] == default else f" --records {meta['records']}"
    flags += "" if kafka else " --gregor-only"
    if meta["source"].startswith("source tree "):
        flags += f" --source {meta['source'].removeprefix('source tree ')}"
    loads = [f["loadavg"] for f in results["figures"]]
    mean_load = sum(loads) / len(loads) if loads else float("nan")
    connector = ", ".join(meta["connector"])
    md = ["## Spark Structured Streaming read rate (issue 17)", "",
          (f"Generated by `.venv/bin/python bench/spark_read.py{flags}` on {meta['started']} "
           f"({meta['seconds'] / 60:.1f} min); rerun it to refresh this section."),
          (f"Brokers: Gregor ({meta['source']})"
           + (f" and {meta['kafka']} (single-node KRaft, `tests/kit/kafka.py`, Kafka's default "
              "settings)" if kafka else ", no Kafka beside it (--gregor-only)")
           + f", on 127.0.0.1. Machine: {meta['machine']}, Python {meta['python']}, {meta['java']}."),
          (f"Spark: pyspark {meta['spark']}, master {meta['spark_master']}, one SparkSession for the whole run "
           f"(`spark_examples/connector.py`), Spark's Kafka connector from `bin/setup-spark`: {connector}."),
          (f"Data: {meta['records']:,} records of {meta['value_bytes']} B values, no key, round-robin over a "
           f"{meta['partitions']}-partition topic, written by one confluent-kafka producer process "
           "(bench/loadgen.py: acks=1, linger 5 ms, batch.size 1 MB, no compression): the same records on "
           "both brokers, written back to disk (sync) before the first query and still in the page cache."),
          ("Query: `readStream.format(\"kafka\")` with `subscribe` and `startingOffsets=earliest`, "
           "`select(length(value), partition)`, `writeStream.format(\"noop\")` with "
           "`trigger(availableNow=True)` and a fresh checkpoint directory; Spark's Kafka consumer settings "
           "are its defaults on both brokers."),
          (f"Each round starts a fresh broker of each kind, the two one after the other (the order alternates "
           f"between rounds), loads it, runs one untimed warm-up query that reads the whole topic (it warms "
           f"Spark's JVM, its code paths for this query, and the broker), then the timed query. "
           f"Each figure is the median [lowest–highest] of {meta['repeat']} rounds; Gregor / Kafka is median "
           "over median, with the lowest and highest of the rounds' own ratios."),
          ("records/s counts the records in the query's progress (the sum of numInputRows, checked equal to "
           "the records loaded) over the wall time from `start()` to the end of `awaitTermination()`, so it "
           "includes the query's start-up and offset lookups; processedRowsPerSecond is Spark's own figure "
           "per micro-batch (rows over the batch's triggerExecution time), median over the query's batches."),
          (f"**Machine load (1-minute load average): {meta['loadavg_before'][0]:.2f} before the run, "
           f"{meta['loadavg_after'][0]:.2f} after, {mean_load:.2f} on average at the start of the timed "
           "queries.** The brokers, the Spark driver and its two task threads share the 2 CPUs; the run itself "
           "(Spark's two task threads, the broker, the producer) keeps the average near 2-3 once it is going, "
           "so the figure before the run is the one that tells how busy other jobs kept the machine."), "",
          "| figure | Gregor | Kafka | Gregor / Kafka |", "|---|---:|---:|---:|"]
    for label, metric, digits in (("records/s, start() to awaitTermination()", "records_per_s", 0),
                                  ("Spark's processedRowsPerSecond, median over batches", "spark_rows_per_s", 0),
                                  ("query wall time, s", "seconds", 2),
                                  ("time in micro-batches (triggerExecution), s", "batch_seconds", 2),
                                  ("of which reading into the sink (addBatch), s", "add_batch_seconds", 2),
                                  ("micro-batches per query", "batches", 0)):
        g, k = (figures.of(results, WORKLOAD, metric, b) for b in ("gregor", "kafka"))
        ratio = figures.ratio(results, WORKLOAD, metric) if metric not in ("batches",) else None
        md.append(f"| {label} | {_s(g, digits)} | {_s(k, digits)} | {_x(ratio) if ratio else '—'} |")
    md += ["", ("Part of each query's time is the same whatever the data: each of Spark's 4 tasks (one per "
                "partition, 2 at a time on local[2]) waits once for a fetch that the broker holds for the "
                "consumer's fetch.max.wait.ms, 500 ms by default, on either broker. In a probe with 20,000 "
                "records, `kafka.fetch.max.wait.ms=10` took the query from 1.4-1.5 s to 0.4-0.5 s on Gregor and "
                "on Kafka alike; the query here keeps Spark's defaults."),
           "", "Per round (timed query records/s; the broker that ran first in the round is marked *):", "",
           "| round | Gregor | Kafka | Gregor / Kafka | load average, Gregor / Kafka |", "|---:|---:|---:|---:|---|"]
    for run in sorted({f["run"] for f in results["figures"]}):
        cells = {f["broker"]: f for f in results["figures"] if f["run"] == run}
        g, k = cells.get("gregor"), cells.get("kafka")
        ratio = f"{g['records_per_s'] / k['records_per_s']:.2f}x" if g and k else "n/a"
        md.append(f"| {run + 1} | {_round_cell(g)} | {_round_cell(k)} | {ratio} | "
                  f"{_load_cell(g)} / {_load_cell(k)} |")
    warm = {b: figures.spread(w["records_per_s"] for w in results["warm_up"] if w["broker"] == b)
            for b in ("gregor", "kafka")}
    load = {b: figures.spread(x["msgs_per_s"] for x in results["loads"] if x["broker"] == b)
            for b in ("gregor", "kafka")}
    md += ["", (f"Untimed, for reference: the warm-up queries read {_s(warm['gregor'])} records/s from Gregor "
                f"and {_s(warm['kafka'])} from Kafka (the run's first warm-up is also the SparkSession's first "
                f"query); loading ran at {_s(load['gregor'])} and {_s(load['kafka'])} msg/s."), ""]
    if results["errors"]:
        md += ["Failed rounds:", ""] + [f"- {e.splitlines()[0]}" for e in results["errors"]] + [""]
    md += ["How to run (needs `bash bin/setup-spark`, and `bash bin/setup-kafka` for Kafka):", "", "```",
           (f".venv/bin/python bench/spark_read.py                  # 3 rounds, {RECORDS:,} records, "
            "both brokers, ~3-4 min"),
           f".venv/bin/python bench/spark_read.py --quick          # {QUICK_RECORDS:,} records, ~1 min",
           ".venv/bin/python bench/spark_read.py --quick --repeat 1 --records 20000 --no-docs   # a smoke run",
           ".venv/bin/python bench/spark_read.py --gregor-only",
           ".venv/bin/python bench/spark_read.py --source /tmp/gregor-abc1234   # Gregor from a git archive of a commit",
           ".venv/bin/python bench/spark_read.py --from-json run.json   # rewrite this section from a saved --json run",
           "```"]
    return "\n".join(md)


def _round_cell(figure: dict | None) -> str:
    if figure is None:
        return "n/a"
    return f"{figure['records_per_s']:,.0f}" + (" *" if figure["first"] else "")


def _load_cell(figure: dict | None) -> str:
    return "n/a" if figure is None else f"{figure['loadavg']:.2f}"


def summary(results: dict) -> str:
    g, k = (figures.of(results, WORKLOAD, "records_per_s", b) for b in ("gregor", "kafka"))
    ratio = figures.ratio(results, WORKLOAD, "records_per_s")
    meta = results["meta"]
    lines = [f"Spark read records/s: Gregor {_s(g)}, Kafka {_s(k)}, Gregor / Kafka {_x(ratio)}"]
    lines += [f"FAILED {e.splitlines()[0]}" for e in results["errors"]]
    lines.append(f"load average before {meta['loadavg_before'][0]:.2f}, after {meta['loadavg_after'][0]:.2f}; "
                 f"{meta['seconds']:.0f} s")
    return "\n".join(lines)


def _brokers(args: argparse.Namespace) -> tuple[str, ...]:
    """Kafka runs beside Gregor unless --gregor-only; without its jars Gregor runs alone, and says so."""
    if args.gregor_only:
        return ("gregor",)
    try:
        import kafka_process
        reason = kafka_process.unavailable()
    except ImportError as exc:
        reason = f"tests/kit/kafka.py cannot be imported: {exc}"
    if reason is None:
        return ("gregor", "kafka")
    print(f"Kafka is not available, measuring Gregor only (bin/setup-kafka resolves it): {reason}", file=sys.stderr)
    return ("gregor",)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RECORDS:,} records instead of {RECORDS:,}")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of fresh brokers (default 3)")
    parser.add_argument("--records", type=int, help="records to load and read (overrides --quick's count)")
    parser.add_argument("--gregor-only", action="store_true", help="do not start Kafka")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--from-json", type=Path, help="rewrite the docs from a saved --json run, run nothing")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="run Gregor from this source tree, e.g. a git archive of a commit")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    records = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    if records < PARTITIONS:
        parser.error(f"--records must be at least {PARTITIONS}")
    BrokerProcess.source = args.source.resolve()
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    else:
        brokers = _brokers(args)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # every Spark listener on loopback
        try:
            spark = spark_session("gregor-spark-read")
        except ConnectorUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        try:
            results = SparkRead(spark, brokers, records, args.repeat, args.quick).run()
        finally:
            spark.stop()
    if args.json:
        args.json.write_text(json.dumps(results))
    print(summary(results))
    if not args.no_docs:
        replace_section(ROOT / "docs" / "benchmarks.md", START, END, markdown(results))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
