"""The broker section's two plots, both brokers on each: throughput against partitions (median,
bars from the lowest to the highest round) and the end-to-end latency CDF at 2,000 msg/s (every
round's samples together). Needs matplotlib (.venv/bin/pip install -e '.[bench]').
"""

from __future__ import annotations

from pathlib import Path

import figures
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLOURS = {"gregor": "tab:blue", "kafka": "tab:orange"}
NAMES = {"gregor": "Gregor", "kafka": "Kafka 3.9"}


def partitions(results: dict, path: Path) -> bool:
    counts = sorted({int(f["workload"].rsplit("/p", 1)[1]) for f in results["figures"]
                     if f["workload"].startswith("produce/1024/p")})
    if not counts:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for broker in ("gregor", "kafka"):
        for kind, style in (("produce", "o-"), ("consume", "s--")):
            points = [(n, figures.of(results, f"{kind}/1024/p{n}", "msgs_per_s", broker)) for n in counts]
            points = [(n, s) for n, s in points if s is not None]
            if not points:
                continue
            xs = [n for n, _ in points]
            mid = np.array([s.median for _, s in points])
            err = np.array([[s.median - s.low for _, s in points], [s.high - s.median for _, s in points]])
            ax.errorbar(xs, mid, yerr=err, fmt=style, color=COLOURS[broker], capsize=3,
                        label=f"{NAMES[broker]} {kind}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions")
    ax.set_ylabel("messages/s (1 KiB), median and range")
    ax.set_title("Throughput vs partitions")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def latency(results: dict, path: Path) -> bool:
    pooled: dict[tuple[str, str], list[float]] = {}
    for s in results.get("latency_samples", []):
        pooled.setdefault((s["broker"], s["flush"]), []).extend(s["latency_ms"])
    if not pooled:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for (broker, flush), samples in sorted(pooled.items()):
        values = np.sort(np.asarray(samples))
        ax.plot(values, np.arange(1, len(values) + 1) / len(values), color=COLOURS[broker],
                ls="-" if flush == "async" else "--", label=f"{NAMES[broker]}, {flush} flush")
    ax.set_xscale("log")
    ax.set_xlabel("end-to-end latency, ms (1 KiB at 2,000 msg/s, all rounds)")
    ax.set_ylabel("fraction of messages")
    ax.set_title("End-to-end latency CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write(results: dict, docs: Path) -> None:
    partitions(results, docs / "bench-partitions.png")
    latency(results, docs / "bench-latency.png")
