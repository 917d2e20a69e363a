"""Conformance against a real Apache Kafka 3.9.0 broker's answers.

`reference/kafka_probe.py` (beside this file) sends 68 wire-level scenarios to a fresh Gregor, and
each scenario's normalised answers are compared, step by step, with Kafka 3.9.0's, which are
committed in `reference/kafka-3.9.0/`. Per push those recordings are the oracle. The full tier
(`bash bin/test --full`) also probes a live Kafka 3.9.0 (tests/kit/kafka.py, from Maven Central), compares
Gregor with those live answers, and checks that the live answers still equal the committed ones
(`test_recordings_are_kafkas_answers`: a scenario that drifted fails and is re-recorded in place,
for `git diff` to show). A scenario where Gregor knowingly differs is an expected failure (strict:
it fails the suite if it starts to match, so the list stays true); docs/protocol.md lists the same
differences.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.gregor import start_broker
from tests.kit.tier import FULL
from tests.kit.kafka import KafkaBroker, KafkaUnavailable

REFERENCE = Path(__file__).resolve().parent / "reference"
RECORDED = REFERENCE / "kafka-3.9.0"

# scenario -> why Gregor's answer differs from Kafka 3.9's
KNOWN_DIFFERENCES: dict[str, str] = {
    "01_api_versions_v3": "features: Gregor finalizes group.version 1 and share.version 2 (the protocols it "
                          "serves), Kafka 3.9 only KRaft's metadata.version",
    "01_api_versions_v4": "features: Gregor supports and finalizes group.version and share.version, Kafka 3.9 "
                          "supports KRaft's metadata.version and kraft.version",
    "04_produce_null_records": "Kafka 3.9 never answers a null records field; Gregor answers INVALID_RECORD",
    "07_fetch_partial_trailing_batch": "Gregor returns whole batches only; Kafka pads with a partial trailing batch",
    "09_describe_configs_topic_with_overrides": "no config synonyms; Kafka's reference broker had log.segment.bytes "
                                                "set statically",
    "09_describe_configs_broker": "Gregor describes its own broker settings, not Kafka's 314",
    "10_malformed_unsupported_api_version": "Fetch v18 is served, as by Kafka 4.4; Kafka 3.9 (up to v17) closes "
                                            "the connection",
}


def _scenarios() -> list[str]:
    if not RECORDED.is_dir():
        return []
    index = json.loads((RECORDED / "index.json").read_text())
    return [s["scenario"] for s in index["scenarios"]]


def _probe(broker, out: Path, label: str) -> Path:
    """Run every scenario against a started broker (stopped afterwards); the directory of answers."""
    try:
        proc = subprocess.run([sys.executable, str(REFERENCE / "kafka_probe.py"), "--bootstrap", broker.bootstrap,
                               "--out", str(out), "--label", label], capture_output=True, text=True,
                              timeout=600)
    finally:
        broker.stop()
    if not (out / "index.json").exists():
        pytest.fail(f"probe produced no output against {label} (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                    f"{proc.stderr[-3000:]}\nbroker log:\n{broker.log()[-3000:]}")
    shutil.rmtree(broker.data_dir, ignore_errors=True)  # the answers are kept, the broker's data is not
    return out


@pytest.fixture(scope="module")
def probe_output(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("probe")
    # Kafka's default initial rebalance delay, as the reference broker had.
    return _probe(start_broker(tmp, **{"group.initial.rebalance.delay.ms": "3000"}), tmp / "out", "gregor")


@pytest.fixture(scope="module")
def live_kafka_answers(tmp_path_factory) -> Path:
    """Kafka 3.9.0's answers recorded live in this run (the full tier)."""
    tmp = tmp_path_factory.mktemp("kafka-probe")
    try:
        kafka = KafkaBroker(tmp / "kafka")
    except KafkaUnavailable as e:
        pytest.fail(f"the full tier probes a live Kafka, and it cannot run: {e}")
    kafka.start()
    return _probe(kafka, tmp / "out", "apache-kafka-3.9.0")


@pytest.fixture(scope="module")
def kafka_answers(request) -> Path:
    """Kafka's answers: live in the full tier, the committed recordings per push."""
    return request.getfixturevalue("live_kafka_answers") if FULL else RECORDED


def _comparable(step: dict) -> dict:
    """A step without what legitimately differs: Gregor's ApiVersions table is its own
    (checked against protocol/api_versions.py by tests/protocol), so its api_keys list is elided."""
    step = {k: v for k, v in step.items() if k not in ("request_bytes_hex",)}
    response = step.get("response")
    if step.get("api") == "ApiVersions" and isinstance(response, dict) and response.get("error_code") == 0:
        step["response"] = {**response, "api_keys": "<elided>"}
    return _static_as_default(step)


# The reference broker's server.properties set log.retention.hours and log.segment.bytes to their default
# values, so Kafka reports these two topic configs as STATIC_BROKER_CONFIG; Gregor, started with no
# settings, rightly reports DEFAULT_CONFIG. Same values, different provenance: compare them as defaults.
_STATIC_IN_REFERENCE = {"retention.ms", "segment.bytes"}


def _static_as_default(node):
    if isinstance(node, dict):
        node = {k: _static_as_default(v) for k, v in node.items()}
        if node.get("name") in _STATIC_IN_REFERENCE and node.get("config_source") == 4:
            node["config_source"] = 5
            if "config_source_name" in node:
                node["config_source_name"] = "DEFAULT_CONFIG"
        return node
    if isinstance(node, list):
        return [_static_as_default(v) for v in node]
    return node


def _assert_same_steps(actual: dict, expected: dict) -> None:
    assert len(actual["steps"]) == len(expected["steps"])
    for got, want in zip(actual["steps"], expected["steps"], strict=True):
        got, want = _comparable(got), _comparable(want)
        # A measured wait (rounded to 100 ms) may run one step long on a loaded machine.
        got_ms, want_ms = got.pop("elapsed_ms_rounded", None), want.pop("elapsed_ms_rounded", None)
        assert (got_ms is None) == (want_ms is None)
        if want_ms is not None:
            assert want_ms <= got_ms <= want_ms + 100, f"step {want.get('label')!r} waited {got_ms} ms"
        assert got == want, f"step {want.get('label')!r} differs"


@pytest.mark.parametrize("scenario", _scenarios())
def test_matches_kafka_reference(scenario: str, probe_output: Path, kafka_answers: Path, request):
    if scenario in KNOWN_DIFFERENCES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[scenario]))
    expected = json.loads((kafka_answers / f"{scenario}.json").read_text())
    assert expected["status"] == "ok", f"the probe failed against Kafka: {expected.get('traceback')}"
    produced_path = probe_output / f"{scenario}.json"
    assert produced_path.exists(), f"probe wrote no {scenario}.json"
    actual = json.loads(produced_path.read_text())
    assert actual["status"] == "ok", actual.get("traceback", actual["status"])
    _assert_same_steps(actual, expected)


# Scenarios whose answers list the broker's static settings: the reference broker's were not those
# the suite's Kafka starts with (tests/kit/kafka.py), so a live answer is not compared with the recording.
STATIC_SETTINGS_SCENARIOS = {"09_describe_configs_topic_with_overrides", "09_describe_configs_broker"}

if FULL:  # per push there is no live Kafka to compare with, and no test
    @pytest.mark.parametrize("scenario", [s for s in _scenarios() if s not in STATIC_SETTINGS_SCENARIOS])
    def test_recordings_are_kafkas_answers(scenario: str, live_kafka_answers: Path):
        """The committed recording of each scenario is what a live Kafka 3.9.0 answers now. A drifted
        one is re-recorded in place (`git diff` shows it) and fails the run."""
        live = json.loads((live_kafka_answers / f"{scenario}.json").read_text())
        recorded_path = RECORDED / f"{scenario}.json"
        try:
            _assert_same_steps(live, json.loads(recorded_path.read_text()))
        except AssertionError:
            shutil.copyfile(live_kafka_answers / f"{scenario}.json", recorded_path)
            raise
