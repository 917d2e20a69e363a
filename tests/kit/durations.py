"""What bin/test's JUnit reports say: where a run's time went, each test folder's and file's summed
test times (python -m tests.kit.durations DIR [N]), or one closing line counting every run in DIR
(python -m tests.kit.durations --total DIR; xfailed counts as skipped, as in JUnit's reports)."""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def times(reports: Path) -> dict[str, dict[str, tuple[float, int]]]:
    """report name -> test file -> (seconds, tests): a test's time is its setup, call and teardown."""
    found: dict[str, dict[str, tuple[float, int]]] = {}
    for report in sorted(reports.glob("*.xml")):
        per: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
        for case in ET.parse(report).getroot().iter("testcase"):
            parts = case.get("classname", "").split(".")
            if parts and parts[-1][:1].isupper():  # a test class
                parts = parts[:-1]
            entry = per["/".join(parts) + ".py"]
            entry[0] += float(case.get("time", 0))
            entry[1] += 1
        found[report.stem] = {name: (seconds, count) for name, (seconds, count) in per.items()}
    return found


def total(reports: Path) -> str:
    """`total: N passed, N failed, N skipped` over every report in `reports`."""
    counts = dict(tests=0, failures=0, errors=0, skipped=0)
    for report in sorted(reports.glob("*.xml")):
        for suite in ET.parse(report).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, 0))
    failed = counts["failures"] + counts["errors"]
    return f"total: {counts['tests'] - failed - counts['skipped']} passed, {failed} failed, {counts['skipped']} skipped"


def main(argv: list[str]) -> None:
    if argv[0] == "--total":
        print(total(Path(argv[1])))
        return
    reports, top = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 30
    for run, per in times(reports).items():
        seconds_in_run = sum(seconds for seconds, _ in per.values())
        print(f"{run}: {seconds_in_run / 60:.1f} min of test time in {sum(c for _, c in per.values())} tests")
        folders: collections.Counter = collections.Counter()
        for name, (seconds, _) in per.items():
            parts = name.split("/")
            folders["/".join(parts[:2]) if parts[0] == "tests" else parts[0]] += seconds
        for folder, seconds in folders.most_common():
            print(f"  {seconds / 60:6.1f} min  {folder}")
        for name, (seconds, count) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"  {seconds:7.1f} s  {count:4d}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
