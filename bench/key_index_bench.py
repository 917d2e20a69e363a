"""Produce throughput with the key index on and off, same broker, same run (issue 23).

Keys are indexed off the write path: a thread (store/dispatch.py, KeyDispatcher) follows the
commitlog and indexes the keys of records of topics with `key.index.enable=true` (the default),
with the per-record walk done by the key worker, a second process under SCHED_IDLE
(store/key_worker.py), so under load it may fall behind and catches up afterwards; the broker reports how far behind it is as the Prometheus gauge
`gregor_key_index_behind_bytes` (admin API, GET /metrics).

Each round starts one fresh Gregor (a temporary data directory, deleted afterwards; default
1 GiB commitlog segments, async flush, `--admin-port 0`, everything on 127.0.0.1) and creates two
1-partition topics with confluent-kafka's AdminClient: `keys-on` with key.index.enable=true and
`keys-off` with key.index.enable=false. One producer process (bench/loadgen.py's produce
mode, as bench/workloads.py runs it: acks=1, linger 5 ms, batch.size 1 MB, no compression) then
writes N records of 1 KiB values, each with a key (the message counter in ASCII), to one topic,
and another producer process N to the other; which goes first alternates between rounds. Before
each produce the key index has caught up, the page cache's dirty data is written back (sync) and
the broker is idle. Both topics' records share the first commitlog segment (2N records stay below
1 GiB), so neither run pays for a new segment. Right when a producer's result arrives (after its
last delivery report), the gauge is read, then read every 50 ms until it is 0 (at most 120 s):
the lag at the end of the produce and the catch-up time. After the round, a lookup by key on the
admin API checks that the index covers the run (the middle record's key is found at its offset)
and that `keys-off` is refused as not indexed.

Rewrites the "Key index off the write path (issue 23)" section of docs/benchmarks.md.

Run: .venv/bin/python bench/key_index_bench.py [--quick] [--repeat N] [--records N]
                                               [--no-docs] [--json PATH] [--from-json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import ROOT, BrokerProcess
from docs_section import replace_section
from figures import Spread, spread
from report import _s, _x
from run import Suite, _describe_source, _have_leaders

START, END = "<!-- key_index_bench:start -->", "<!-- key_index_bench:end -->"
LOADGEN = Path(__file__).resolve().parent / "loadgen.py"
TOPICS = {"on": "keys-on", "off": "keys-off"}
VALUE_BYTES = 1024
# Two runs of N records of ~1.04 KB on the log each must stay inside the first 1 GiB segment.
RECORDS, QUICK_RECORDS = 400_000, 100_000
MAX_RECORDS = 480_000
CATCH_UP_LIMIT_S = 120.0
POLL_S = 0.05
BEHIND, RECEIVED = "gregor_key_index_behind_bytes", "gregor_request_bytes_total"
TARGET = 0.90  # issue 23: produce with the key index on >= 90% of produce with it off


class AdminBroker(BrokerProcess):
    """bench/broker_process.py's Gregor with the admin HTTP API on, and reads of it."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None) -> None:
        super().__init__(data_dir, settings, admin_api=True)

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://{self.admin}{path}", timeout=10) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def metrics(self, *names: str) -> list[int]:
        """Unlabelled samples from /metrics, in the order asked."""
        status, body = self.get("/metrics")
        values = []
        for name in names:
            found = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.MULTILINE)
            if status != 200 or not found:
                raise RuntimeError(f"/metrics answered {status} without {name}")
            values.append(int(float(found.group(1))))
        return values

    def behind(self) -> int:
        """gregor_key_index_behind_bytes: commitlog bytes written but not yet key-indexed."""
        return self.metrics(BEHIND)[0]


class KeyIndexBench:
    def __init__(self, records: int, repeat: int, quick: bool) -> None:
        self.records = records
        self.repeat = repeat
        self.quick = quick
        self.results: dict = {"rounds": [], "errors": []}
        self.tmp = Path()

    def run(self) -> dict:
        meta = self.results["meta"] = {
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": self.quick,
            "repeat": self.repeat, "records": self.records, "value_bytes": VALUE_BYTES,
            "source": _describe_source(BrokerProcess.source),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "python": platform.python_version(), "loadavg_before": os.getloadavg()}
        started = time.perf_counter()
        self.tmp = Path(tempfile.mkdtemp(prefix="gregor-key-index-"))
        try:
            for run in range(self.repeat):
                order = ("on", "off") if run % 2 == 0 else ("off", "on")
                print(f"round {run + 1}/{self.repeat}, {order[0]} first (at {time.perf_counter() - started:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
                try:
                    self.results["rounds"].append(self.round(run, order))
                except (RuntimeError, OSError, subprocess.SubprocessError, KafkaException) as exc:
                    print(f"  FAILED: {exc}", flush=True)
                    self.results["errors"].append(f"round {run + 1}: {exc}")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        meta["loadavg_after"] = os.getloadavg()
        meta["seconds"] = time.perf_counter() - started
        return self.results

    def round(self, run: int, order: tuple[str, str]) -> dict:
        proc = AdminBroker(self.tmp / f"gregor-r{run}", {"flush.mode": "async"})
        try:
            proc.start()
            proc.wait_idle()
            create_topics(proc.bootstrap)
            result: dict = {"run": run, "first": order[0]}
            for which in order:
                result[which] = self.produce(proc, which)
                r = result[which]
                print(f"  key index {which:3}: {r['msgs_per_s']:>9,.0f} msg/s ({r['seconds']:.2f} s, broker "
                      f"{r['broker_busy']:.0%} of a core); behind at the end {r['behind_bytes'] / 1e6:,.1f} MB "
                      f"({r['behind_share']:.0%} of {r['request_bytes'] / 1e6:,.0f} MB), caught up after "
                      f"{_catch_up_text(r)}", flush=True)
            result["lookup"] = check_lookups(proc, self.records)
            Suite.check_alive(proc)
            result["ratio"] = result["on"]["msgs_per_s"] / result["off"]["msgs_per_s"]
            print(f"  on / off {result['ratio']:.3f}; {result['lookup']}", flush=True)
            return result
        finally:
            proc.discard()
            shutil.rmtree(proc.data_dir, ignore_errors=True)
            proc.stderr_path.unlink(missing_ok=True)

    def produce(self, proc: AdminBroker, which: str) -> dict:
        """N keyed records to one topic; the lag when the producer is done and the catch-up time."""
        settled = wait_caught_up(proc)
        os.sync()  # the previous run's data written back, not during this one
        proc.wait_idle()
        spec = {"mode": "produce", "bootstrap": proc.bootstrap, "topics": [TOPICS[which]], "partitions_per_topic": 1,
                "size": VALUE_BYTES, "acks": "1", "seconds": 300, "max_messages": self.records,
                "min_messages": self.records, "max_seconds": 300, "keys": True}
        load = os.getloadavg()[0]
        received = proc.metrics(RECEIVED)[0]
        cpu_before = proc.cpu_seconds()
        result, (behind, received_after), cpu_after, at_end = run_loadgen(proc, spec)
        cpu = cpu_after - cpu_before
        catch_up = None
        left = behind
        while left:
            if time.perf_counter() - at_end > CATCH_UP_LIMIT_S:
                break
            time.sleep(POLL_S)
            left = proc.behind()
            if not left:
                catch_up = time.perf_counter() - at_end
        if not behind:
            catch_up = 0.0
        if result["delivered"] != self.records:
            raise RuntimeError(f"{which}: {result['delivered']:,} of {self.records:,} records delivered "
                               f"({result['failed']} failed, {result['undelivered']} undelivered)")
        return {"msgs_per_s": result["msgs_per_s"], "mb_per_s": result["mb_per_s"], "seconds": result["seconds"],
                "broker_cpu_s": cpu, "broker_busy": cpu / result["seconds"], "behind_bytes": behind,
                "request_bytes": received_after - received, "behind_share": behind / (received_after - received),
                "catch_up_s": catch_up, "left_after_limit": left if catch_up is None else 0,
                "behind_before": settled, "loadavg": load}


def create_topics(bootstrap: str) -> None:
    """keys-on with key.index.enable=true, keys-off with key.index.enable=false; both with
    leaders, and the broker says each has its setting."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.create_topics([NewTopic(TOPICS["on"], 1, 1, config={"key.index.enable": "true"}),
                                   NewTopic(TOPICS["off"], 1, 1, config={"key.index.enable": "false"})],
                                  operation_timeout=60, request_timeout=90)
    for future in futures.values():
        future.result()
    deadline = time.monotonic() + 60
    while not _have_leaders(admin, list(TOPICS.values()), 1):
        if time.monotonic() > deadline:
            raise RuntimeError("the topics had no leader after 60 s")
        time.sleep(0.1)
    for which, topic in TOPICS.items():
        configs = admin.describe_configs([ConfigResource("topic", topic)])
        entries = next(iter(configs.values())).result(timeout=30)
        value = entries["key.index.enable"].value if "key.index.enable" in entries else "false"
        if value.lower() != ("true" if which == "on" else "false"):
            raise RuntimeError(f"{topic} has key.index.enable={value}")


def run_loadgen(proc: AdminBroker, spec: dict) -> tuple[dict, list[int], float, float]:
    """One loadgen process; (its result, [the key index lag, request bytes received] and the broker's
    CPU seconds read the moment the result arrived, when that was). The result line comes right
    after the producer's flush returned."""
    with tempfile.TemporaryFile("w+") as err:
        client = subprocess.Popen([sys.executable, str(LOADGEN), json.dumps(spec)], stdout=subprocess.PIPE,
                                  stderr=err, text=True, cwd=ROOT)
        deadline = time.monotonic() + 360
        line = ""
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(client.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
                while not line:
                    if time.monotonic() > deadline:
                        raise RuntimeError("loadgen produce did not finish in 360 s")
                    Suite.check_alive(proc)
                    if sel.select(0.1):
                        line = client.stdout.readline()  # type: ignore[union-attr]
                        if not line:  # end of file: it exited without a result
                            break
            if line:
                at_end = time.perf_counter()
                behind = proc.metrics(BEHIND, RECEIVED)
                cpu = proc.cpu_seconds()
            client.wait(60)
        finally:
            if client.poll() is None:
                client.send_signal(signal.SIGKILL)
                client.wait()
        if client.returncode != 0 or not line:
            err.seek(0)
            raise RuntimeError(f"loadgen produce failed: {err.read()[-2000:]}")
    return json.loads(line), behind, cpu, at_end


def wait_caught_up(proc: AdminBroker) -> int:
    """Wait (at most CATCH_UP_LIMIT_S) until the key index covers the log; returns what is left."""
    deadline = time.monotonic() + CATCH_UP_LIMIT_S
    left = proc.behind()
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = proc.behind()
    return left


def check_lookups(proc: AdminBroker, records: int) -> str:
    """The middle record of keys-on found by its key at its offset; keys-off refused as not indexed."""
    key = records // 2
    status, body = proc.get("/v1/messages?" + urllib.parse.urlencode({"topic": TOPICS["on"], "key": str(key)}))
    messages = json.loads(body).get("messages") if status == 200 else None
    if not messages or [m.get("offset") for m in messages] != [key]:
        raise RuntimeError(f"lookup of key {key} in {TOPICS['on']}: {status} {body[:300]!r}")
    status, body = proc.get("/v1/messages?" + urllib.parse.urlencode({"topic": TOPICS["off"], "key": str(key)}))
    if status != 400 or b"does not index keys" not in body:
        raise RuntimeError(f"lookup in {TOPICS['off']} should be refused: {status} {body[:300]!r}")
    return f"key {key} found at offset {key} in {TOPICS['on']}, {TOPICS['off']} not indexed"


# -- report --------------------------------------------------------------------


def _catch_up_text(r: dict) -> str:
    if r["catch_up_s"] is None:
        return f"more than {CATCH_UP_LIMIT_S:.0f} s ({r['left_after_limit'] / 1e6:,.1f} MB still behind)"
    return f"{r['catch_up_s']:.2f} s"


def _values(results: dict, which: str, metric: str) -> list[float]:
    return [r[which][metric] for r in results["rounds"] if r[which].get(metric) is not None]


def _ratio(results: dict) -> Spread | None:
    on, off = spread(_values(results, "on", "msgs_per_s")), spread(_values(results, "off", "msgs_per_s"))
    rounds = [r["ratio"] for r in results["rounds"]]
    if on is None or off is None or not rounds:
        return None
    return Spread(on.median / off.median, min(rounds), max(rounds), len(rounds))


def _x3(s: Spread | None) -> str:
    if s is None:
        return "n/a"
    return f"{s.median:.3f}x" + ("" if s.n == 1 else f" [{s.low:.3f}–{s.high:.3f}]")


def _disagreement(results: dict) -> list[str]:
    """A paragraph when the rounds' own ratios are far apart: then the median does not settle the target."""
    rounds = results["rounds"]
    ratios = [r["ratio"] for r in rounds]
    if len(ratios) < 2 or max(ratios) / min(ratios) < 1.25:
        return []
    on, off = (spread(_values(results, w, "msgs_per_s")) for w in ("on", "off"))
    steadier, wilder = ("on", "off") if on.high / on.low <= off.high / off.low else ("off", "on")
    s, w = (on, off) if steadier == "on" else (off, on)
    return [(f"The rounds disagree: on / off ranged from {min(ratios):.2f} to {max(ratios):.2f}, so this run does "
             f"not settle the target. Each produce lasts about {statistics.median(_values(results, 'on', 'seconds')):.1f} s "
             "(the two runs of a round must fit in the first 1 GiB segment). The key-index-"
             f"{wilder} runs varied most ({w.low:,.0f}–{w.high:,.0f} msg/s, {w.high / w.low:.1f}x) while the "
             f"key-index-{steadier} runs stayed within {s.low:,.0f}–{s.high:,.0f} ({s.high / s.low:.2f}x)."), ""]


def _scaled(s: Spread | None, by: float) -> Spread | None:
    return None if s is None else Spread(s.median * by, s.low * by, s.high * by, s.n)


def _mb(s: Spread | None) -> Spread | None:
    return _scaled(s, 1e-6)


def _pct(s: Spread | None) -> Spread | None:
    return _scaled(s, 100)


def markdown(results: dict) -> str:
    meta = results["meta"]
    rounds = results["rounds"]
    flags = (" --quick" if meta["quick"] else "") + f" --repeat {meta['repeat']}"
    default = QUICK_RECORDS if meta["quick"] else RECORDS
    flags += "" if meta["records"] == default else f" --records {meta['records']}"
    loads = [r[w]["loadavg"] for r in rounds for w in ("on", "off")]
    mean_load = sum(loads) / len(loads) if loads else float("nan")
    ratio = _ratio(results)
    met = sum(r["ratio"] >= TARGET for r in rounds)
    if ratio is None:
        verdict = "no figures"
    else:
        verdict = (("**met**" if ratio.median >= TARGET else "missed")
                   + f" (median {ratio.median:.4f}; met in {met} of {len(rounds)} rounds)")
    catch_ups = [r["on"]["catch_up_s"] for r in rounds]
    unfinished = sum(c is None for c in catch_ups)
    rates = [r["on"]["behind_bytes"] / r["on"]["catch_up_s"] for r in rounds
             if r["on"]["catch_up_s"] and r["on"]["behind_bytes"]]
    md = ["## Key index off the write path (issue 23)", "",
          (f"Generated by `.venv/bin/python bench/key_index_bench.py{flags}` on {meta['started']} "
           f"({meta['seconds'] / 60:.1f} min); rerun it to refresh this section."),
          (f"Gregor ({meta['source']}), one fresh broker per round in a temporary data directory: default "
           "1 GiB commitlog segments, async flush, the admin API on (`--admin-port 0`), on 127.0.0.1. "
           f"Machine: {meta['machine']}, Python {meta['python']}."),
          ("Keys are indexed off the write path by a thread that follows the commitlog (store/dispatch.py, "
           "`KeyDispatcher`), which hands the per-record walk to the key worker, a second process under SCHED_IDLE "
           "(store/key_worker.py), and adds what comes back with numpy; under load the index may fall "
           "behind and catches up afterwards. Two 1-partition topics on the same broker: `keys-on` created with "
           "`key.index.enable=true` and `keys-off` with `key.index.enable=false`."),
          (f"Each round one producer process (bench/loadgen.py's produce mode with `\"keys\": true`: acks=1, "
           f"linger 5 ms, batch.size 1 MB, no compression) writes {meta['records']:,} records of "
           f"{meta['value_bytes']:,} B values to one topic, each keyed with its message counter in ASCII "
           "(unique keys), and a second process the same to the other topic; the order alternates between rounds. "
           "Before each produce the key index has caught up, dirty pages are written back (sync) and the broker is "
           "idle; both runs stay in the first commitlog segment. msgs/s is the producer's delivered records over "
           "the time from its first send to the end of its flush."),
          ("Lag: `gregor_key_index_behind_bytes` (GET /metrics), commitlog bytes written but not yet key-indexed, "
           "read the moment the producer's result arrives (after its last delivery report). Catch-up: from that "
           f"reading until the gauge reads 0, polled every {POLL_S * 1000:.0f} ms (at most "
           f"{CATCH_UP_LIMIT_S:.0f} s). After each round a lookup by key on the admin API found the middle "
           "record of `keys-on` at its offset, and `keys-off` was refused as not indexed."),
          (f"Each figure is the median [lowest–highest] of {len(rounds)} rounds; on / off is median over median, "
           "with the lowest and highest of the rounds' own ratios."),
          (f"**Machine load (1-minute load average): {meta['loadavg_before'][0]:.2f} before the run, "
           f"{meta['loadavg_after'][0]:.2f} after, {mean_load:.2f} on average at the start of the produce runs.** "
           "The broker (its event loop, the key dispatcher and the commitlog's allocator and prefaulter threads), "
           "its key worker and the producer process share the 2 CPUs; the broker CPU row counts the broker "
           "process only, not its key worker."), "",
          "| figure | key index on | key index off | on / off | target | verdict |",
          "|---|---:|---:|---:|---|---|",
          (f"| produce 1 KiB keyed, msg/s | {_s(spread(_values(results, 'on', 'msgs_per_s')))} | "
           f"{_s(spread(_values(results, 'off', 'msgs_per_s')))} | {_x3(ratio)} | >= {TARGET:.2f}x | {verdict} |"),
          (f"| broker CPU while producing, share of one core | "
           f"{_s(spread(_values(results, 'on', 'broker_busy')), 2)} | "
           f"{_s(spread(_values(results, 'off', 'broker_busy')), 2)} | — | — | — |"),
          (f"| key index behind at the end of the produce, MB | "
           f"{_s(_mb(spread(_values(results, 'on', 'behind_bytes'))), 1)} | "
           f"{_s(_mb(spread(_values(results, 'off', 'behind_bytes'))), 1)} | — | — | — |"),
          (f"| the same, share of the run's produce bytes (request bytes received), % | "
           f"{_s(_pct(spread(_values(results, 'on', 'behind_share'))), 0)} | "
           f"{_s(_pct(spread(_values(results, 'off', 'behind_share'))), 0)} | — | — | — |"),
          (f"| catch-up after the produce, s | {_s(spread(_values(results, 'on', 'catch_up_s')), 2)}"
           + (f" ({unfinished} round(s) not caught up in {CATCH_UP_LIMIT_S:.0f} s)" if unfinished else "")
           + f" | {_s(spread(_values(results, 'off', 'catch_up_s')), 2)} | — | — | — |"), "",
          ("The `keys-off` column's lag is the dispatcher walking that run's entries without indexing them "
           "(it follows the whole commitlog; the topic's setting is checked per entry, not per record)."
           + (f" Catching up after the `keys-on` run indexed {_s(_mb(spread(rates)), 0)} MB/s of commitlog "
              "with the writer idle." if rates else "")), "",
          *_disagreement(results),
          "Per round (the run that went first is marked *):", "",
          ("| round | on, msg/s | off, msg/s | on / off | on: behind at end, MB (share) | on: catch-up, s | "
           "off: behind at end, MB | load average, on / off |"), "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rounds:
        on, off = r["on"], r["off"]
        catch = f"{on['catch_up_s']:.2f}" if on["catch_up_s"] is not None else f"> {CATCH_UP_LIMIT_S:.0f}"
        md.append(f"| {r['run'] + 1} | {on['msgs_per_s']:,.0f}{' *' if r['first'] == 'on' else ''} | "
                  f"{off['msgs_per_s']:,.0f}{' *' if r['first'] == 'off' else ''} | {r['ratio']:.3f} | "
                  f"{on['behind_bytes'] / 1e6:,.1f} ({100 * on['behind_share']:.0f}%) | {catch} | "
                  f"{off['behind_bytes'] / 1e6:,.1f} | {on['loadavg']:.2f} / {off['loadavg']:.2f} |")
    md += ["", ("Not measured: a run at a fixed lower rate (where the index should keep up as it goes). "
                "bench/loadgen.py's produce mode has no rate limit; its fixed-rate mode (latency-produce) "
                "sends records without keys."), ""]
    if results["errors"]:
        md += ["Failed rounds:", ""] + [f"- {e.splitlines()[0]}" for e in results["errors"]] + [""]
    md += ["How to run:", "", "```",
           f".venv/bin/python bench/key_index_bench.py                 # 3 rounds of 2 x {RECORDS:,} records, ~1 min",
           f".venv/bin/python bench/key_index_bench.py --quick         # 2 x {QUICK_RECORDS:,} records per round",
           ".venv/bin/python bench/key_index_bench.py --repeat 5 --records 200000 --no-docs --json run.json",
           ".venv/bin/python bench/key_index_bench.py --from-json run.json   # rewrite this section from a saved run",
           "```"]
    return "\n".join(md)


def summary(results: dict) -> str:
    on, off = (spread(_values(results, w, "msgs_per_s")) for w in ("on", "off"))
    lag = _mb(spread(_values(results, "on", "behind_bytes")))
    catch = spread(_values(results, "on", "catch_up_s"))
    return (f"key index on {_s(on)} msg/s, off {_s(off)} msg/s, on / off {_x(_ratio(results))} "
            f"(target >= {TARGET:.2f}); behind at the end of the produce {_s(lag, 1)} MB, caught up after "
            f"{_s(catch, 2)} s; load {results['meta']['loadavg_before'][0]:.2f} before, "
            f"{results['meta']['loadavg_after'][0]:.2f} after ({results['meta']['seconds'] / 60:.1f} min)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RECORDS:,} records per run instead of {RECORDS:,}")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, one fresh broker each (default 3)")
    parser.add_argument("--records", type=int, help=f"records per produce run (overrides --quick; at most "
                        f"{MAX_RECORDS:,}, so both runs fit in the first 1 GiB segment)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--from-json", type=Path, help="rewrite the docs from a saved --json run, run nothing")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    records = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    if not 2 <= records <= MAX_RECORDS:
        parser.error(f"--records must be between 2 and {MAX_RECORDS:,}")
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    else:
        results = KeyIndexBench(records, args.repeat, args.quick).run()
    if args.json:
        args.json.write_text(json.dumps(results))
    if results["rounds"]:
        print(summary(results))
    if not args.no_docs and results["rounds"]:
        replace_section(ROOT / "docs" / "benchmarks.md", START, END, markdown(results))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
