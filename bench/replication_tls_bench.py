"""What TLS between a group's nodes costs (issue 18, docs/replication.md *Security between nodes*):
produce throughput to a 3-node group whose nodes talk in plaintext against the same group with
TLS between them, Gregor and Apache Kafka 3.9 in the same run.

Gregor: a broker group of bench/replication_bench.py (one private ZooKeeper, 1 GiB segments) with
security.inter.broker.protocol=PLAINTEXT or SSL: the replication port, where the master ships
its commitlog to each follower, speaks TLS with each node's certificate checked both ways.
Kafka: tests/kit/kafka_cluster.py's 3-node KRaft cluster with inter.broker.listener.name
PLAINTEXT, or an SSL listener on each node (ssl.client.auth=required) that the replica fetchers
use. Both: the producer writes to the PLAINTEXT listener, so only the traffic between nodes
changes; the controller's (Kafka) and ZooKeeper's (Gregor) connections stay plaintext. One PEM
keystore per run (made with openssl by tests/security/tls.py: a CA, one node certificate for
127.0.0.1 with serverAuth and clientAuth) for every node of either broker.

Per round (--repeat, default 3; each figure the median with the lowest and highest round), per
broker and per protocol between the nodes (the order alternating over the rounds): a fresh group,
warmed up as bench/replication_bench.py's (past the first segment, then acks=all), a topic of 1
partition and replication factor 3, then each case for --seconds with a full page cache before
it (bench/page_cache.py): bench/loadgen.py's librdkafka producer with acks=all and acks=1, and
bench/direct_producer.py's equal batches with acks=all. Broker CPU per GB is summed over the nodes.
Rewrites the "Replication through TLS" section of docs/benchmarks.md (not with --no-docs).
Everything listens on 127.0.0.1; only the processes started here are stopped.

Run: .venv/bin/python bench/replication_tls_bench.py [--repeat N] [--seconds S] [--gregor-only]
                                                     [--no-docs] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import confluent_kafka
import replication_bench as rb
from docs_section import replace_section
from figures import Spread, spread
from page_cache import Ballast

SECTION = ("<!-- replication-tls:start -->", "<!-- replication-tls:end -->")
PROTOCOLS = ("PLAINTEXT", "SSL")
CASES = (("librdkafka", "all"), ("librdkafka", "1"), ("equal-batches", "all"))
NODE_SUBJECT = "/O=Gregor bench/CN=gregor-node"
SEGMENT = 1 << 30


def node_certificates(directory: Path) -> dict[str, str]:
    """The ssl.* settings every node of either broker takes: a node keystore (PEM, key in clear)
    and the CA as truststore."""
    from tests.security.tls import make_certificates, node_keystore
    made = make_certificates(directory)
    keystore = node_keystore(directory, "node", NODE_SUBJECT)
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(made.ca)}


def system(run: rb.Run, broker: str, protocol: str, ssl_settings: dict[str, str]):
    if broker == "gregor":
        settings = {"security.inter.broker.protocol": protocol}
        if protocol == "SSL":
            settings.update(ssl_settings)
        return rb.gregor_group(run, "tls", SEGMENT, settings=settings)
    settings = dict(rb.KAFKA_CLUSTER)
    if protocol == "SSL":
        settings.update(ssl_settings, **{"ssl.client.auth": "required"})
    return rb.kafka_cluster(run, settings, inter_broker=protocol)


def measure(run: rb.Run, broker: str, protocol: str, rnd: int, ssl_settings: dict[str, str]) -> None:
    with system(run, broker, protocol, ssl_settings) as group:
        rb.warm_up(group, SEGMENT)
        rb.create_topics(group.bootstrap, ["p1"], 1, 3)
        cases = list(CASES) if rnd % 2 == 0 else list(CASES)[::-1]
        for client, acks in cases:
            group.wait_idle()
            run.fill_page_cache()
            produce = rb.produce if client == "librdkafka" else rb.produce_equal_batches
            result = produce(group, ["p1"], 1, acks, run.args.seconds)
            gb = result["delivered"] * rb.VALUE / 1e9
            fig = run.record(kind="produce", broker=broker, between=protocol, client=client, acks=acks, round=rnd,
                             mb_per_s=result["mb_per_s"], msgs_per_s=result["msgs_per_s"],
                             delivered=result["delivered"], failed=result["failed"],
                             undelivered=result["undelivered"], in_set=rb.sync_state_set(group),
                             cpu_s_per_gb=result["cpu_s"] / gb if gb else None)
            trouble = f", {result['failed']} failed, {result['undelivered']} undelivered" \
                if result["failed"] or result["undelivered"] else ""
            in_set = f", sync-state set {fig['in_set']}" if fig["in_set"] is not None else ""
            print(f"  {broker:6} {protocol:9} {client:13} acks={acks:3}: {fig['mb_per_s']:7.1f} MB/s "
                  f"(broker CPU {fig['cpu_s_per_gb'] or 0:.1f} s/GB{in_set}{trouble})", flush=True)


def _fmt(s: Spread | None, digits: int = 0) -> str:
    return "—" if s is None else f"{s.median:,.{digits}f} ({s.low:,.{digits}f}–{s.high:,.{digits}f})"


def _ratio_text(s: Spread | None) -> str:
    return "—" if s is None else f"{s.median:.2f}x ({s.low:.2f}–{s.high:.2f})"


def _pick(results: list[dict], metric: str, **sel) -> dict[int, float]:
    return {r["round"]: r[metric] for r in results
            if r[metric] is not None and all(r.get(k) == v for k, v in sel.items())}


def report(run: rb.Run, meta: dict) -> str:
    results = run.results
    brokers = [b for b in ("gregor", "kafka") if any(r["broker"] == b for r in results)]
    lines = [
        (f"Measured {meta['date']} on {meta['machine']} (load average {meta['load_before']:.1f} at the start), "
         f"{meta['source']}, `{meta['command']}`: {run.args.repeat} round(s), each figure the median with the "
         f"lowest and highest round. The run took {meta['minutes']:.0f} min."),
        "",
        ("Settings. Every node and the producer on 127.0.0.1 of this machine; the producer writes to the "
         "PLAINTEXT listener of each broker, so only the traffic between nodes changes. bench/loadgen.py "
         f"(confluent-kafka {meta['client']}: 1 KiB values, linger 5 ms, batch.size 1 MB, no compression) and "
         f"bench/direct_producer.py (equal batches of {rb.EQUAL_BATCH_RECORDS} records, one per request, "
         f"{rb.EQUAL_BATCH_IN_FLIGHT} in flight), {run.args.seconds:g} s per case, 1 partition of replication "
         "factor 3. Gregor: bench/replication_bench.py's group (1 GiB segments, "
         f"zookeeper.session.timeout.ms={rb.SESSION_TIMEOUT_MS}, min.insync.replicas=1), "
         "security.inter.broker.protocol PLAINTEXT or SSL. Kafka 3.9.0: tests/kit/kafka_cluster.py's "
         f"KRaft cluster ({rb.NODE_HEAP} heap per JVM, min.insync.replicas=2), inter.broker.listener.name "
         "PLAINTEXT or an SSL listener with ssl.client.auth=required. TLS: one node certificate (RSA 2048, "
         "PEM keystore) on every node, TLS 1.3 as both negotiate it. " + meta["page_cache"]),
        "",
        "| broker | between nodes | producer | acks | MB/s | of plaintext | broker CPU s/GB (all nodes) |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for broker in brokers:
        for client, acks in CASES:
            for protocol in PROTOCOLS:
                sel = {"broker": broker, "client": client, "acks": acks}
                mb = _pick(results, "mb_per_s", between=protocol, **sel)
                cpu = _pick(results, "cpu_s_per_gb", between=protocol, **sel)
                plain = _pick(results, "mb_per_s", between="PLAINTEXT", **sel)
                ratio = None
                if mb and plain and statistics.median(plain.values()):
                    paired = [mb[k] / plain[k] for k in mb if plain.get(k)]
                    ratio = Spread(statistics.median(mb.values()) / statistics.median(plain.values()),
                                   min(paired), max(paired), len(paired)) if paired else None
                lines.append(f"| {'Gregor' if broker == 'gregor' else 'Kafka 3.9.0'} | {protocol} | {client} | {acks} | "
                             f"{_fmt(spread(list(mb.values())) if mb else None)} | "
                             f"{_ratio_text(ratio)} | "
                             f"{_fmt(spread(list(cpu.values())) if cpu else None, 1)} |")
    trouble = [r for r in results if r["failed"] or r["undelivered"]]
    if trouble:
        lines += ["", "Records not delivered: " + "; ".join(
            f"{r['broker']} {r['between']} {r['client']} acks={r['acks']} round {r['round'] + 1}: "
            f"{r['failed']} failed, {r['undelivered']} undelivered" for r in trouble) + "."]
    for text in run.errors + run.skipped:
        lines += ["", f"Not measured: {text}"]
    return "\n".join(lines)



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    args.quick = False

    from both_brokers import compared

    from tests.kit.zookeeper import ZOOKEEPER_JAR, ZooKeeperProcess
    if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
        print("ZooKeeper is not installed (bin/setup-zookeeper: apt-get install zookeeper)", file=sys.stderr)
        return 1
    brokers = compared(args.gregor_only)
    tmp = Path(tempfile.mkdtemp(prefix="gregor-replication-tls-"))
    run = rb.Run(args, tmp)
    why = Ballast.available()
    if why is None:
        run.ballast = Ballast(tmp / "page-cache-ballast", rb.case_disk(args.seconds))  # deleted with tmp
    else:
        run.skipped.append(f"A full page cache before each case: {why}.")
    if args.gregor_only:
        run.skipped.append("Apache Kafka (--gregor-only).")
    elif "kafka" not in brokers:
        import kafka_process
        run.skipped.append(f"Apache Kafka: {kafka_process.unavailable()}.")
    command = "bench/replication_tls_bench.py" + "".join(f" {a}" for a in sys.argv[1:] if a != "--no-docs")
    meta = {"date": time.strftime("%Y-%m-%d"), "load_before": os.getloadavg()[0], "source": rb._source(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "client": f"{confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}",
            "command": command}
    started = time.monotonic()
    try:
        ssl_settings = node_certificates(tmp / "certs")
        run.zk = ZooKeeperProcess(tmp / "zookeeper" / "data")
        (tmp / "zookeeper").mkdir(parents=True)
        run.zk.start()
        for rnd in range(args.repeat):
            order = brokers if rnd % 2 == 0 else brokers[::-1]
            protocols = PROTOCOLS if rnd % 2 == 0 else PROTOCOLS[::-1]
            for broker in order:
                for protocol in protocols:
                    rb.guarded(run, f"round {rnd + 1}/{args.repeat}, {broker}, {protocol} between nodes "
                               f"(at {time.monotonic() - started:.0f} s)", measure, broker, protocol, rnd, ssl_settings)
    finally:
        if run.zk is not None:
            run.zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    meta["minutes"] = (time.monotonic() - started) / 60
    meta["page_cache"] = ("Page cache: cold (no fincore)." if run.ballast is None else
                          "Page cache: full before each case (bench/page_cache.py), as in bench/replication_bench.py.")
    text = report(run, meta)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": run.results, "errors": run.errors,
                                         "skipped": run.skipped}, indent=1))
    if not args.no_docs:
        replace_section(rb.ROOT / "docs" / "benchmarks.md", *SECTION, "## Replication through TLS (issue 18)\n\n" + text)
    return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
