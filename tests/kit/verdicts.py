"""Kafka's verdicts kept between runs: a Kafka cell answered from its recorded outcome, not a JVM.

A *Kafka cell* is a test item one of whose parameters is "apache-kafka" (tests/kit/both.py,
compat_tests' `target`) or "apache-kafka-<version>" (compat_tests' Kafka 4.4.0): the same scenario's run against a real Apache Kafka, beside Gregor's. Its
outcome is decided by the test's source, the sources of the project's fixtures it uses, its
parameters, the Kafka version and whether compat_tests run against clusters; a hash of those is the
cell's key. tests/kafka_verdicts.json keeps, per key, the outcome Kafka gave when the cell last ran
live.

Per push (`bash bin/test`), a Kafka cell whose key has a recorded passed, skipped or xfailed outcome
is not run: it is deselected and counted in the summary. A cell whose key has no verdict (a new or
changed test) runs live against Kafka, and its outcome is added to the file, to be committed. The
full tier (`bash bin/test --full`, or `--kafka-live`) runs every Kafka cell live, re-records every
outcome and fails the run if one differs from what was recorded under the same key (drift: Kafka,
a client or a helper outside the key changed what the cell sees). A skip because Kafka could not be
set up ("NOT RUN against Apache Kafka") is never recorded, and counts as drift in the full tier.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from pathlib import Path

import pytest

from tests.kit.tier import FULL

ROOT = Path(__file__).resolve().parents[2]
# GREGOR_KAFKA_VERDICTS: another file (tests/oracle/test_verdicts.py runs the plugin on its own)
VERDICTS = Path(os.environ.get("GREGOR_KAFKA_VERDICTS", ROOT / "tests" / "kafka_verdicts.json"))
KAFKA_PARAM = "apache-kafka"
TRUSTED = {"passed", "skipped", "xfailed"}  # recorded outcomes a push may answer from
NOT_RUN = "NOT RUN against Apache Kafka"  # a skip that says Kafka could not run: never recorded


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--kafka-live", action="store_true", default=False,
                     help="run every Kafka cell against a live Kafka and re-record its verdict "
                          "(the full tier does; tests/kit/verdicts.py)")


def is_kafka_cell(item: pytest.Item) -> bool:
    """Whether a parameter of `item` is "apache-kafka", or "apache-kafka-<version>" (compat_tests'
    Kafka 4 target)."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(value == KAFKA_PARAM or str(value).startswith(f"{KAFKA_PARAM}-")
                                        for value in callspec.params.values())


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return repr(obj)


def _kafka_version() -> str:
    # imported when first needed: the launcher's module loads the client adapters, which a run of
    # Gregor-only tests need not pay for at start
    from tests.kit.kafka import KAFKA_VERSION
    return KAFKA_VERSION


def _clusters(config: pytest.Config) -> bool:
    try:
        cluster = config.getoption("--cluster")
    except ValueError:  # compat_tests' conftest not loaded in this run
        cluster = False
    return bool(cluster) or os.environ.get("GREGOR_COMPAT_CLUSTER") == "1"


def cell_version(item: pytest.Item) -> str:
    """The Kafka release a cell runs against: the one its "apache-kafka-<version>" parameter names,
    else its `kafka_version` mark's, else the suite's (3.9.0)."""
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        if str(value).startswith(f"{KAFKA_PARAM}-"):
            return str(value).removeprefix(f"{KAFKA_PARAM}-")
    mark = item.get_closest_marker("kafka_version")
    return mark.args[0] if mark is not None else _kafka_version()


def cell_key(item: pytest.Item) -> str:
    """The hash of what decides a Kafka cell's outcome."""
    parts = [item.nodeid, _source(getattr(item, "function", item)), f"kafka={cell_version(item)}",
             f"cluster={_clusters(item.config)}"]
    fixtures = getattr(item, "_fixtureinfo", None)
    for name, defs in sorted((fixtures.name2fixturedefs if fixtures else {}).items()):
        for fixturedef in defs:
            path = inspect.getsourcefile(fixturedef.func) or ""
            if path.startswith(str(ROOT)) and "/.venv/" not in path:  # the project's own fixtures
                parts.append(f"fixture {name}:\n{_source(fixturedef.func)}")
    return hashlib.sha256("\n\0".join(parts).encode()).hexdigest()[:20]


class _Verdicts:
    def __init__(self, config: pytest.Config) -> None:
        self.live = FULL or config.getoption("--kafka-live")
        self.recorded: dict[str, dict] = json.loads(VERDICTS.read_text()) if VERDICTS.exists() else {}
        self.answered: list[str] = []  # node ids answered from a recorded verdict
        self.cells: dict[str, str] = {}  # node id -> key, Kafka cells that run
        self.versions: dict[str, str] = {}  # node id -> Kafka release, of cells that run
        self.phases: dict[str, dict[str, tuple[str, str]]] = {}  # node id -> phase -> (outcome, reason)

    def outcome(self, nodeid: str) -> tuple[str, str]:
        phases = self.phases.get(nodeid, {})
        for phase in ("setup", "call"):
            if phase in phases and (phase == "call" or phases[phase][0] != "passed"):
                outcome = phases[phase]
                break
        else:
            return "not run", ""
        if phases.get("teardown", ("passed", ""))[0] == "failed":
            return "error", phases["teardown"][1]
        return outcome


_STATE = pytest.StashKey[_Verdicts]()
_DRIFT = pytest.StashKey[list]()
_running: list[_Verdicts] = []  # this process's session (pytest_runtest_logreport is given no config)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _Verdicts(config)
    _running[:] = [config.stash[_STATE]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[_STATE]
    keep, answered = [], []
    for item in items:
        if not is_kafka_cell(item):
            keep.append(item)
            continue
        key = cell_key(item)
        recorded = state.recorded.get(key)
        if not state.live and recorded is not None and recorded["outcome"] in TRUSTED:
            answered.append(item)
        else:
            state.cells[item.nodeid] = key
            state.versions[item.nodeid] = cell_version(item)
            keep.append(item)
    if answered:
        state.answered = [item.nodeid for item in answered]
        config.hook.pytest_deselected(items=answered)
        items[:] = keep


def _phase_outcome(report: pytest.TestReport) -> tuple[str, str]:
    reason = ""
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
    if hasattr(report, "wasxfail"):
        return ("xfailed" if report.skipped else "xpassed"), str(report.wasxfail)
    if report.failed:
        return ("failed" if report.when == "call" else "error"), ""
    return ("skipped" if report.skipped else "passed"), reason


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every test's phases (the Kafka cells are picked at the end: with pytest-xdist the controller
    learns which tests were Kafka cells only when each worker finishes)."""
    state = _running[0] if _running else None
    if state is not None:
        state.phases.setdefault(report.nodeid, {})[report.when] = _phase_outcome(report)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller: a worker's Kafka cells (collected and deselected there)."""
    state = _running[0] if _running else None
    found = getattr(node, "workeroutput", {}).get("gregor_kafka_cells")
    if state is not None and found:
        found = json.loads(found)
        state.cells.update(found["cells"])
        state.versions.update(found.get("versions", {}))
        state.answered = sorted(set(state.answered) | set(found["answered"]))


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its controller records the verdicts
        workeroutput["gregor_kafka_cells"] = json.dumps({"cells": state.cells, "versions": state.versions,
                                                           "answered": state.answered})
        return
    if not state.cells:
        return
    drift, updated = [], dict(state.recorded)
    version, clusters = _kafka_version(), _clusters(session.config)
    for nodeid, key in state.cells.items():
        outcome, reason = state.outcome(nodeid)
        if outcome == "not run":
            continue
        before = state.recorded.get(key)
        if before is not None and before["outcome"] != outcome:
            drift.append(f"{nodeid}: recorded {before['outcome']}, now {outcome} {reason[:200]}".rstrip())
        if NOT_RUN in reason:
            continue
        for stale in [k for k, v in updated.items()
                      if v["test"] == nodeid and v.get("cluster", False) == clusters and k != key]:
            del updated[stale]  # the cell's test or fixtures changed: its old key is gone for good
        entry = {"test": nodeid, "outcome": outcome, "kafka": state.versions.get(nodeid, version)}
        if clusters:
            entry["cluster"] = True
        if reason and outcome != "passed":
            entry["reason"] = reason[:300]
        updated[key] = entry
    if updated != state.recorded:
        VERDICTS.write_text(json.dumps(dict(sorted(updated.items(), key=lambda kv: (kv[1]["test"], kv[0]))),
                                       indent=1) + "\n")
    session.config.stash[_DRIFT] = drift
    if drift and state.live and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or hasattr(config, "workeroutput"):
        return
    live = len(state.cells)
    if state.answered or live:
        terminalreporter.write_line(
            f"Kafka cells: {len(state.answered)} answered by verdicts recorded in "
            f"{_shown(VERDICTS)} (Kafka {_kafka_version()}), {live} run live")
    for line in config.stash.get(_DRIFT, []):
        terminalreporter.write_line(f"KAFKA VERDICT DRIFT {line}", red=True)
