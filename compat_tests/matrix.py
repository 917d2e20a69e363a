"""Run compat_tests and regenerate the scenario x client x broker matrix in docs/compatibility.md.

    .venv/bin/python -m compat_tests.matrix                      # fresh Gregor and Apache Kafka, rewrites the doc
    .venv/bin/python -m compat_tests.matrix --bootstrap H:P --out other-matrix.md
    .venv/bin/python -m compat_tests.matrix --from-junit REPORTS/suite.xml [RERUN.xml]   # from a run's
                                  # JUnit report (bash bin/test --full's); a later report's cells replace

A pytest plugin records every test's outcome by (scenario, client, broker); a skip is a cell of
its own, with its reason as a footnote, never dropped, and so is a known difference (xfail). The
doc's text outside the markers is left alone.
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
        # (scenario, client, broker) -> (outcome, reason)
        self.cells: dict[tuple[str, str, str], tuple[str, str]] = {}
        self.where: dict[str, tuple[str, str, str]] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            params = dict(getattr(item, "callspec", None).params) if hasattr(item, "callspec") else {}
            client = params.pop("client_name", "-")
            broker = params.pop("target", "-")
            module = item.path.stem.removeprefix("test_")
            extra = "-".join(str(v) if len(str(v)) <= 30 else f"{len(str(v))} chars" for v in params.values())
            scenario = f"{module}: {item.originalname.removeprefix('test_')}" + (f" [{extra}]" if extra else "")
            self.where[item.nodeid] = (scenario, client, broker)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        key = self.where.get(report.nodeid)
        if key is None:
            return
        if hasattr(report, "wasxfail"):
            if report.when == "call" or report.skipped:
                self.cells[key] = ("known", report.wasxfail)
        elif report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.cells[key] = ("skip", reason.removeprefix("Skipped: "))
        elif report.failed:
            self.cells[key] = ("FAIL", f"{report.when} failed")
        elif report.when == "call" and key not in self.cells:
            self.cells[key] = ("pass", "")


BROKER_TITLES = {"gregor": "Gregor", "apache-kafka": "Apache Kafka 3.9.0", "apache-kafka-4.4.0": "Apache Kafka 4.4.0",
                 "given": "the given broker"}


def render(cells: dict[tuple[str, str, str], tuple[str, str]], where: str) -> str:
    clients = [c for c in CLIENT_NAMES if any(k[1] == c for k in cells)]
    brokers = [b for b in BROKER_TITLES if any(k[2] == b for k in cells)]
    scenarios = sorted({s for s, _, _ in cells})
    reasons: dict[str, int] = {}
    lines = [f"| scenario | {' | '.join(clients)} |", "|---" * (len(clients) + 1) + "|"]
    for scenario in scenarios:
        row = []
        for client in clients:
            outcomes = []
            for broker in brokers:
                outcome, reason = cells.get((scenario, client, broker), ("–", ""))
                if outcome in ("skip", "known"):
                    outcome = f"{outcome} [{reasons.setdefault(reason, len(reasons) + 1)}]"
                outcomes.append(outcome)
            row.append(" / ".join(outcomes))
        lines.append(f"| {scenario} | {' | '.join(row)} |")
    summary = []
    for broker in brokers:
        counts = Counter(outcome for (_, _, b), (outcome, _) in cells.items() if b == broker)
        summary.append(f"- {BROKER_TITLES[broker]}: {sum(counts.values())} scenario×client cells, "
                       f"{counts['pass']} pass, {counts['FAIL']} fail, {counts['known']} known difference, "
                       f"{counts['skip']} skip.")
    legend = f"Each cell reads {' / '.join(BROKER_TITLES[b] for b in brokers)} ({where})."
    notes = [f"{n}. {reason}" for reason, n in reasons.items()]
    return "\n".join([*summary, "", legend, "", *lines, "", "Skip reasons and known differences:", "", *notes])


def cells_from_junit(path: Path) -> dict[tuple[str, str, str], tuple[str, str]]:
    """The matrix's cells from a JUnit XML report of a run (GREGOR_TEST_REPORTS of `bash bin/test
    --full`, whose Kafka cells all ran live): the test id's parameters begin with the broker, then
    the client."""
    import xml.etree.ElementTree as ET

    brokers = sorted(BROKER_TITLES, key=len, reverse=True)
    clients = sorted(CLIENT_NAMES, key=len, reverse=True)
    cells: dict[tuple[str, str, str], tuple[str, str]] = {}
    for case in ET.parse(path).iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        if not classname.startswith("compat_tests.") or "[" not in name:
            continue
        function, ident = name[:-1].split("[", 1)
        broker = next((b for b in brokers if ident == b or ident.startswith(b + "-")), None)
        if broker is None:
            continue
        rest = ident[len(broker) + 1:]
        client = next((c for c in clients if rest == c or rest.startswith(c + "-")), "-")
        extra = rest[len(client) + 1:] if client != "-" else rest
        scenario = f"{classname.rsplit('.', 1)[1].removeprefix('test_')}: {function.removeprefix('test_')}" + (
            f" [{extra}]" if extra else "")
        skipped = case.find("skipped")
        # compared with None: an Element without children is false
        if case.find("failure") is not None or case.find("error") is not None:
            cells[(scenario, client, broker)] = ("FAIL", "failed")
        elif skipped is not None:
            message = (skipped.get("message") or "").removeprefix("Skipped: ")
            known = skipped.get("type") == "pytest.xfail"
            cells[(scenario, client, broker)] = ("known" if known else "skip", message)
        else:
            cells[(scenario, client, broker)] = ("pass", "")
    return cells


def _write(out: Path, table: str) -> None:
    text = out.read_text() if out.exists() else f"{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    out.write_text(f"{head}{START}\n{table}\n{END}{tail}")
    print(f"matrix written to {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="broker under test (default: a fresh Gregor and a fresh Apache Kafka)")
    parser.add_argument("--out", type=Path, default=DOC, help="file whose matrix section is rewritten")
    parser.add_argument("--from-junit", type=Path, metavar="XML", nargs="+",
                        help="render the cells of finished runs' JUnit reports instead of running (a later "
                             "report's cell replaces an earlier one's: a cell run again)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args(argv)
    if args.from_junit:
        cells: dict[tuple[str, str, str], tuple[str, str]] = {}
        for report in args.from_junit:
            cells.update(cells_from_junit(report))
        names = ", ".join(r.name for r in args.from_junit)
        _write(args.out, render(cells, f"from the JUnit report(s) {names} of a full run"))
        return 0
    plugin = MatrixPlugin()
    pytest_args = ["-p", "no:cacheprovider", "-q", "-rs", str(ROOT / "compat_tests"), *args.pytest_args]
    if args.bootstrap:
        pytest_args += ["--bootstrap", args.bootstrap]
    rc = pytest.main(pytest_args, plugins=[plugin])
    where = args.bootstrap or "both started by the run on this machine"
    _write(args.out, render(plugin.cells, where))
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
