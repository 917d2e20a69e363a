"""Run compat_tests and regenerate the scenario x client matrix in docs/compatibility.md.

    .venv/bin/python -m compat_tests.matrix                      # fresh Gregor, rewrites the doc
    .venv/bin/python -m compat_tests.matrix --bootstrap H:P --out kafka-matrix.md

A pytest plugin records every test's outcome by (scenario, client); a skip is a cell of its own,
with its reason as a footnote, never dropped. The doc's text outside the markers is left alone.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import pytest

from compat_tests.clients import CLIENT_NAMES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/compatibility.md"
START, END = "<!-- matrix:start -->", "<!-- matrix:end -->"


class MatrixPlugin:
    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], tuple[str, str]] = {}  # (scenario, client) -> (outcome, reason)
        self.where: dict[str, tuple[str, str]] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            params = dict(getattr(item, "callspec", None).params) if hasattr(item, "callspec") else {}
            client = params.pop("client_name", "-")
            module = item.path.stem.removeprefix("test_")
            extra = "-".join(str(v) if len(str(v)) <= 30 else f"{len(str(v))} chars" for v in params.values())
            scenario = f"{module}: {item.originalname.removeprefix('test_')}" + (f" [{extra}]" if extra else "")
            self.where[item.nodeid] = (scenario, client)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        key = self.where.get(report.nodeid)
        if key is None:
            return
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.cells[key] = ("skip", reason.removeprefix("Skipped: "))
        elif report.failed:
            self.cells[key] = ("FAIL", f"{report.when} failed")
        elif report.when == "call" and key not in self.cells:
            self.cells[key] = ("pass", "")


def render(cells: dict[tuple[str, str], tuple[str, str]], broker: str) -> str:
    clients = [c for c in CLIENT_NAMES if any(k[1] == c for k in cells)]
    scenarios = sorted({s for s, _ in cells})
    reasons: dict[str, int] = {}
    lines = [f"| scenario | {' | '.join(clients)} | Apache Kafka |", "|---" * (len(clients) + 2) + "|"]
    for scenario in scenarios:
        row = []
        for client in clients:
            outcome, reason = cells.get((scenario, client), ("–", ""))
            if outcome == "skip":
                note = reasons.setdefault(reason, len(reasons) + 1)
                outcome = f"skip [{note}]"
            row.append(outcome)
        lines.append(f"| {scenario} | {' | '.join(row)} | not run here |")
    counts = Counter(outcome for outcome, _ in cells.values())
    summary = (f"{len(cells)} scenario×client cells against {broker}: {counts['pass']} pass, "
               f"{counts['FAIL']} fail, {counts['skip']} skip.")
    notes = [f"{n}. {reason}" for reason, n in reasons.items()]
    return "\n".join([summary, "", *lines, "", "Skip reasons:", "", *notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="broker under test (default: a fresh Gregor)")
    parser.add_argument("--out", type=Path, default=DOC, help="file whose matrix section is rewritten")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args(argv)
    plugin = MatrixPlugin()
    pytest_args = ["-p", "no:cacheprovider", "-q", "-rs", str(ROOT / "compat_tests"), *args.pytest_args]
    if args.bootstrap:
        pytest_args += ["--bootstrap", args.bootstrap]
    rc = pytest.main(pytest_args, plugins=[plugin])
    broker = args.bootstrap or "a fresh Gregor"
    table = render(plugin.cells, broker)
    text = args.out.read_text() if args.out.exists() else f"{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    args.out.write_text(f"{head}{START}\n{table}\n{END}{tail}")
    print(f"matrix written to {args.out}", file=sys.stderr)
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
