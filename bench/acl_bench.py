"""What ACLs cost: produce and consume throughput of a user whose ACLs allow it, with the
authorizer on, against the same user with no authorizer, Gregor and Apache Kafka 3.9 in the same
run (issue 20).

Each round starts one fresh broker per kind and case, with a PLAINTEXT listener (User:ANONYMOUS,
a super user when ACLs are on: the admin path) and a SASL_PLAINTEXT one (SCRAM-SHA-256; the
bench user `bench`, created before the start). With ACLs on
(`authorizer.class.name=...StandardAuthorizer`, `super.users=User:ANONYMOUS`), the bench user is
given WRITE and READ on its topic and READ on its group, plus 1,000 other bindings of other users
and topics, so that decisions look among many. bench/loadgen.py then produces N records of 1 KiB
(confluent-kafka, acks=1) and consumes them back over SASL_PLAINTEXT as that user. Figures are
MB/s of record values; the cost is the ACL case's MB/s over the one without.

Rewrites the "ACLs (issue 20)" section of docs/benchmarks.md.

Run: .venv/bin/python bench/acl_bench.py [--repeat N] [--records N] [--gregor-only] [--no-docs]
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

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from both_brokers import compared, started
from broker_process import ROOT
from docs_section import replace_section
from figures import spread

SECTION = ("<!-- acls:start -->", "<!-- acls:end -->")
USER, PASSWORD = "bench", "bench-secret"
VALUE = 1024
OTHER_BINDINGS = 1000
CLIENT = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER,
          "sasl.password": PASSWORD}
ACLS_ON = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:ANONYMOUS"}


def _run(spec: dict) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "loadgen.py"), json.dumps(spec)],
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _grant(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ALLOW, LITERAL = AclPermissionType.ALLOW, ResourcePatternType.LITERAL
    bindings = [AclBinding(ResourceType.TOPIC, topic, LITERAL, f"User:{USER}", "*", op, ALLOW)
                for op in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, "bench-acl", LITERAL, f"User:{USER}", "*", AclOperation.READ,
                               ALLOW))
    bindings += [AclBinding(ResourceType.TOPIC, f"other-{i}", LITERAL, f"User:other-{i % 50}", "*",
                            AclOperation.WRITE, ALLOW) for i in range(OTHER_BINDINGS)]
    for f in admin.create_acls(bindings).values():
        f.result(60)
    time.sleep(2)  # Kafka applies bindings asynchronously


def one_round(broker: str, tmp: Path, records: int, acls: bool) -> dict:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256", **(ACLS_ON if acls else {})}
    with started(broker, tmp, settings, [(USER, PASSWORD, "SCRAM-SHA-256")]) as listeners:
        admin = AdminClient({"bootstrap.servers": listeners["PLAINTEXT"]})
        admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(30)
        if acls:
            _grant(listeners["PLAINTEXT"], "bench")
        time.sleep(1)
        base = {"bootstrap": listeners["SASL_PLAINTEXT"], "topics": ["bench"], "partitions_per_topic": 1,
                "size": VALUE, "client": CLIENT}
        produced = _run({**base, "mode": "produce", "acks": "1", "seconds": 300, "max_messages": records})
        consumed = _run({**base, "mode": "consume", "expected": records, "seconds": 300, "group": "bench-acl"})
    result = {"broker": broker, "acls": acls, "produce_mb_per_s": produced["mb_per_s"],
              "consume_mb_per_s": consumed["mb_per_s"], "delivered": produced["delivered"],
              "received": consumed["received"]}
    print(json.dumps(result), flush=True)
    return result


def report(results: list[dict], args: argparse.Namespace) -> str:
    brokers = [b for b in ("gregor", "kafka") if any(r["broker"] == b for r in results)]
    rounds = len(results) // (2 * len(brokers))
    lines = [(f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, {rounds} rounds per broker "
              f"(median, with the lowest and highest round), {args.records:,} records of 1 KiB, "
              f"`bench/acl_bench.py --repeat {args.repeat}`: a SCRAM-SHA-256 user over SASL_PLAINTEXT, "
              f"confluent-kafka producer (acks=1) and consumer in a group; with ACLs, StandardAuthorizer and "
              f"the user's 3 bindings among {OTHER_BINDINGS:,} others."), "",
             "| broker | ACLs | produce MB/s | consume MB/s |", "|---|---|---:|---:|"]
    for b in brokers:
        for acls in (False, True):
            rs = [r for r in results if r["broker"] == b and r["acls"] == acls]
            p, c = spread(r["produce_mb_per_s"] for r in rs), spread(r["consume_mb_per_s"] for r in rs)
            lines.append(f"| {'Gregor' if b == 'gregor' else 'Kafka 3.9.0'} | {'on' if acls else 'off'} | "
                         f"{p.median:.0f} ({p.low:.0f}–{p.high:.0f}) | {c.median:.0f} ({c.low:.0f}–{c.high:.0f}) |")
    lines.append("")
    for b in brokers:
        med = {(acls, m): statistics.median(r[m] for r in results if r["broker"] == b and r["acls"] == acls)
               for acls in (False, True) for m in ("produce_mb_per_s", "consume_mb_per_s")}
        lines.append(f"{'Gregor' if b == 'gregor' else 'Kafka'}: with ACLs at "
                     f"{med[(True, 'produce_mb_per_s')] / med[(False, 'produce_mb_per_s')]:.2f}x for produce, "
                     f"{med[(True, 'consume_mb_per_s')] / med[(False, 'consume_mb_per_s')]:.2f}x for consume.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=150_000)
    parser.add_argument("--gregor-only", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    brokers = compared(args.gregor_only)
    results = []
    for run in range(args.repeat):
        for broker in brokers:
            for acls in ((False, True) if run % 2 == 0 else (True, False)):
                tmp = Path(tempfile.mkdtemp(prefix=f"gregor-acl-{broker}-"))
                try:
                    results.append(one_round(broker, tmp, args.records, acls))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    text = report(results, args)
    print(text)
    if not args.no_docs:
        replace_section(ROOT / "docs" / "benchmarks.md", *SECTION, "## ACLs (issue 20)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
