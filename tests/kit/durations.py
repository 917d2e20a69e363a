"""Where a run's time went: each test folder's and file's summed test times, from the JUnit
reports `bin/test` keeps in $GREGOR_TEST_REPORTS (python -m tests.kit.durations DIR [N])."""

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


def main(argv: list[str]) -> None:
    reports, top = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 30
    for run, per in times(reports).items():
        total = sum(seconds for seconds, _ in per.values())
        print(f"{run}: {total / 60:.1f} min of test time in {sum(c for _, c in per.values())} tests")
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
