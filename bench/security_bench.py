"""Produce and consume throughput over SASL_SSL against PLAINTEXT, Gregor and Apache Kafka 3.9 in
the same run (issue 20): what TLS and SASL cost.

Each round starts one fresh broker per kind with two listeners, PLAINTEXT and SASL_SSL
(SCRAM-SHA-256, a PEM keystore made with `openssl` for 127.0.0.1; Gregor: `gregor user add`
before the start; Kafka: `kafka-storage format --add-scram`), both on 127.0.0.1, everything
else at its defaults (Gregor: async flush). Per listener, a fresh 1-partition topic gets N
records of 1 KiB from bench/loadgen.py's produce mode (confluent-kafka, acks=1, linger 5 ms,
batch.size 1 MB, no compression; on SASL_SSL with security.protocol, sasl.* and ssl.ca.location),
then loadgen's consume mode reads them back from the beginning over the same listener. The
listeners alternate order between rounds. Figures are MB/s of record values; the cost of
SASL_SSL is its MB/s over PLAINTEXT's on the same broker.

Rewrites the "TLS and SASL (issue 20)" section of docs/benchmarks.md.

Run: .venv/bin/python bench/security_bench.py [--repeat N] [--records N] [--gregor-only] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from both_brokers import compared, started
from broker_process import ROOT
from docs_section import replace_section
from figures import spread

SECTION = ("<!-- security:start -->", "<!-- security:end -->")
USER, PASSWORD = "bench", "bench-secret"
VALUE = 1024


def make_certs(where: Path) -> tuple[Path, Path]:
    """(keystore PEM: key + certificate for 127.0.0.1, CA PEM)."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=bench-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost")
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "broker.pem", "-days", "2", "-extfile", "san.ext")
    (where / "keystore.pem").write_bytes((where / "broker.key").read_bytes() + (where / "broker.pem").read_bytes())
    return where / "keystore.pem", where / "ca.pem"


def _settings(keystore: Path) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore)}


def _client(listener: str, ca: Path) -> dict[str, str]:
    if listener == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER,
            "sasl.password": PASSWORD, "ssl.ca.location": str(ca)}


def _run(spec: dict) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "loadgen.py"), json.dumps(spec)],
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def one_round(broker: str, tmp: Path, keystore: Path, ca: Path, records: int, order: list[str]) -> list[dict]:
    out = []
    with started(broker, tmp, _settings(keystore), [(USER, PASSWORD, "SCRAM-SHA-256")]) as listeners:
        admin = AdminClient({"bootstrap.servers": listeners["PLAINTEXT"]})
        for f in admin.create_topics([NewTopic(f"t-{name}", 1, 1) for name in order]).values():
            f.result(30)
        time.sleep(1)
        for name in order:
            base = {"bootstrap": listeners[name], "topics": [f"t-{name}"], "partitions_per_topic": 1,
                    "size": VALUE, "client": _client(name, ca)}
            produced = _run({**base, "mode": "produce", "acks": "1", "seconds": 300, "max_messages": records})
            consumed = _run({**base, "mode": "consume", "expected": records, "seconds": 300,
                             "group": f"bench-{name}"})
            out.append({"broker": broker, "listener": name, "produce_mb_per_s": produced["mb_per_s"],
                        "consume_mb_per_s": consumed["mb_per_s"], "delivered": produced["delivered"],
                        "received": consumed["received"]})
            print(json.dumps(out[-1]), flush=True)
    return out


def report(results: list[dict], args: argparse.Namespace) -> str:
    brokers = [b for b in ("gregor", "kafka") if any(r["broker"] == b for r in results)]
    rounds = len(results) // (2 * len(brokers))
    lines = [(f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, {rounds} rounds per broker "
             f"(median, with the lowest and highest round), {args.records:,} records of 1 KiB, "
             f"`bench/security_bench.py --repeat {args.repeat}`: one broker with a PLAINTEXT and a SASL_SSL "
             "(SCRAM-SHA-256, RSA 2048 certificate) listener, confluent-kafka producer (acks=1) and consumer "
             "per listener."), "",
             "| broker | listener | produce MB/s | consume MB/s |", "|---|---|---:|---:|"]
    for b in brokers:
        for name in ("PLAINTEXT", "SASL_SSL"):
            rs = [r for r in results if r["broker"] == b and r["listener"] == name]
            p, c = spread(r["produce_mb_per_s"] for r in rs), spread(r["consume_mb_per_s"] for r in rs)
            lines.append(f"| {'Gregor' if b == 'gregor' else 'Kafka 3.9.0'} | {name} | {p.median:.0f} "
                         f"({p.low:.0f}–{p.high:.0f}) | {c.median:.0f} ({c.low:.0f}–{c.high:.0f}) |")
    lines.append("")
    for b in brokers:
        rs = {n: [r for r in results if r["broker"] == b and r["listener"] == n] for n in ("PLAINTEXT", "SASL_SSL")}
        ratio = {m: statistics.median(r[m] for r in rs["SASL_SSL"]) / statistics.median(r[m] for r in rs["PLAINTEXT"])
                 for m in ("produce_mb_per_s", "consume_mb_per_s")}
        lines.append(f"{'Gregor' if b == 'gregor' else 'Kafka'}: SASL_SSL at {ratio['produce_mb_per_s']:.2f}x of "
                     f"PLAINTEXT for produce, {ratio['consume_mb_per_s']:.2f}x for consume.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    brokers = compared(args.gregor_only)
    certs = Path(tempfile.mkdtemp(prefix="gregor-security-certs-"))
    keystore, ca = make_certs(certs)
    results = []
    try:
        for run in range(args.repeat):
            order = ["PLAINTEXT", "SASL_SSL"] if run % 2 == 0 else ["SASL_SSL", "PLAINTEXT"]
            for broker in brokers:
                tmp = Path(tempfile.mkdtemp(prefix=f"gregor-security-{broker}-"))
                try:
                    results += one_round(broker, tmp, keystore, ca, args.records, order)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    text = report(results, args)
    print(text)
    if not args.no_docs:
        replace_section(ROOT / "docs" / "benchmarks.md", *SECTION, "## TLS and SASL (issue 20)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
