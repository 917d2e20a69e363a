"""bench/run.py's per-round figures gathered for the report: each broker's median and range over
the rounds, and Gregor / Kafka as median over median with the range of the per-round ratios
(a round's two brokers ran the same configuration one after the other).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    n: int


def per_run(results: dict, workload: str, metric: str, broker: str) -> dict[int, float]:
    """{round: value} of one metric of one workload on one broker."""
    return {f["run"]: f[metric] for f in results["figures"]
            if f["workload"] == workload and f["broker"] == broker and f.get(metric) is not None}


def spread(values) -> Spread | None:
    values = list(values)
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values), len(values))


def of(results: dict, workload: str, metric: str, broker: str) -> Spread | None:
    return spread(per_run(results, workload, metric, broker).values())


def ratio(results: dict, workload: str, metric: str) -> Spread | None:
    """Gregor / Kafka: the median is median over median; low and high are the extreme per-round ratios."""
    gregor = per_run(results, workload, metric, "gregor")
    kafka = per_run(results, workload, metric, "kafka")
    g, k = spread(gregor.values()), spread(kafka.values())
    if g is None or k is None or not k.median:
        return None
    paired = [gregor[r] / kafka[r] for r in gregor if kafka.get(r)]
    if not paired:
        return None
    return Spread(g.median / k.median, min(paired), max(paired), len(paired))


def resources(results: dict, config: str, metric: str, broker: str) -> Spread | None:
    return spread(b[metric] for b in results.get("brokers", [])
                  if b["config"] == config and b["broker"] == broker and b.get(metric) is not None)


def side_by_side(results: dict[str, dict[str, list[float]]], heading: str, kafka: str) -> list[str]:
    """The issue benchmarks' table (share_bench.py, group_bench.py): per figure, each broker's
    median [range] over the rounds and the per-round Gregor / Kafka ratios' median [range].
    `results` is {"gregor"|"kafka": {figure: [one value per round]}}."""
    def shown(values: list[float]) -> str:
        s = spread(values)
        return f"{s.median:,.0f} [{s.low:,.0f}–{s.high:,.0f}]"

    lines = [f"| {heading} | Gregor median [range] | {kafka} median [range] | Gregor / Kafka per round |",
             "|---|---|---|---|"]
    for figure, values in results["gregor"].items():
        theirs = results.get("kafka", {}).get(figure)
        ratios = spread(g / k for g, k in zip(values, theirs) if k) if theirs else None
        ratio = f"{ratios.median:.2f} [{ratios.low:.2f}–{ratios.high:.2f}]" if ratios else "–"
        lines.append(f"| {figure} | {shown(values)} | {shown(theirs) if theirs else '–'} | {ratio} |")
    return lines
