"""Conformance against a real Apache Kafka 3.9.0 broker's recorded answers.

`../shared/kafka-reference/kafka_probe.py` sends 68 wire-level scenarios to a
fresh Gregor; each scenario's normalised answers are compared, step by step,
with what Kafka 3.9 answered. A scenario where Gregor knowingly differs is an
expected failure (strict: it fails the suite if it starts to match, so the
list stays true); docs/protocol.md lists the same differences.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, start_broker

REFERENCE = ROOT.parent / "shared" / "kafka-reference"
RECORDED = REFERENCE / "kafka-3.9.0"

# scenario -> why Gregor's answer differs from Kafka 3.9's
KNOWN_DIFFERENCES: dict[str, str] = {
    "01_api_versions_v0": "Gregor advertises its own (smaller) version ranges",
    "01_api_versions_v3": "Gregor advertises its own (smaller) version ranges",
    "01_api_versions_v4": "Gregor advertises its own (smaller) version ranges",
    "04_produce_v2": "Produce v0-2 are refused with UNSUPPORTED_VERSION; Kafka 3.9 accepts them",
    "04_produce_null_records": "Kafka 3.9 never answers a null records field; Gregor answers INVALID_RECORD",
    "07_fetch_sessions": "Gregor keeps no fetch sessions (session_id 0)",
}


def _scenarios() -> list[str]:
    if not RECORDED.is_dir():
        return []
    index = json.loads((RECORDED / "index.json").read_text())
    return [s["scenario"] for s in index["scenarios"]]


@pytest.fixture(scope="module")
def probe_output(tmp_path_factory) -> Path:
    if not (REFERENCE / "kafka_probe.py").exists():
        pytest.skip(f"kafka reference not found at {REFERENCE} (CI has ../shared beside the repo)")
    tmp = tmp_path_factory.mktemp("probe")
    broker = start_broker(tmp, **{"group.initial.rebalance.delay.ms": "3000"})
    out = tmp / "out"
    try:
        proc = subprocess.run([sys.executable, str(REFERENCE / "kafka_probe.py"), "--bootstrap", broker.bootstrap,
                               "--out", str(out), "--label", "gregor"], capture_output=True, text=True,
                              timeout=600)
    finally:
        broker.stop()
    if not (out / "index.json").exists():
        pytest.fail(f"probe produced no output (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                    f"\nbroker log:\n{broker.log()[-3000:]}")
    return out


def _comparable(step: dict) -> dict:
    return {k: v for k, v in step.items() if k not in ("request_bytes_hex",)}


@pytest.mark.parametrize("scenario", _scenarios())
def test_matches_kafka_reference(scenario: str, probe_output: Path, request):
    if scenario in KNOWN_DIFFERENCES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[scenario]))
    expected = json.loads((RECORDED / f"{scenario}.json").read_text())
    produced_path = probe_output / f"{scenario}.json"
    assert produced_path.exists(), f"probe wrote no {scenario}.json"
    actual = json.loads(produced_path.read_text())
    assert actual["status"] == "ok", actual.get("traceback", actual["status"])
    assert len(actual["steps"]) == len(expected["steps"])
    for got, want in zip(actual["steps"], expected["steps"]):
        assert _comparable(got) == _comparable(want), f"step {want.get('label')!r} differs"
