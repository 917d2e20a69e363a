"""Conformance against real Apache Kafka brokers' answers: Kafka 3.9.0 and Kafka 4.4.0.

`reference/kafka_probe.py` (beside this file) sends 68 wire-level scenarios to a fresh Gregor, and
each scenario's normalised answers are compared, step by step, with each Kafka version's, which are
committed in `reference/kafka-<version>/`. Per push those recordings are the oracles. The full tier
(`bash bin/test --full`) also probes a live Kafka of each version (tests/kit/kafka.py, from Maven
Central; one JVM at a time: each is stopped once probed), compares Gregor with those live answers,
and checks that the live answers still equal the committed ones (`test_recordings_are_kafkas_answers`:
a scenario that drifted fails and is re-recorded in place, for `git diff` to show). A scenario where
Gregor knowingly differs from a version is an expected failure (strict: it fails the suite if it
starts to match, so the list stays true); docs/protocol.md lists the same differences. Kafka 3.9.0's
test ids are the scenario's name alone, as before Kafka 4.4.0 was added; Kafka 4.4.0's carry
`4.4.0-` before it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.gregor import start_broker
from tests.kit.kafka import KafkaBroker, KafkaUnavailable
from tests.kit.tier import FULL

REFERENCE = Path(__file__).resolve().parent / "reference"
VERSIONS = ("3.9.0", "4.4.0")
FIRST = VERSIONS[0]  # its test ids are the scenario names alone


def recorded(version: str) -> Path:
    """The directory of Kafka `version`'s committed answers."""
    return REFERENCE / f"kafka-{version}"


_KIP_896 = "Kafka 4 removed {0} (KIP-896) and closes the connection on it; Gregor serves {0}, as Kafka 3.9"
_TOPIC_CONFIGS = ("a topic's configs are Kafka 3.9's list and defaults; Kafka 4.4 drops message.format.version, "
                  "message.downconversion.enable and message.timestamp.difference.max.ms, adds four, defaults "
                  "message.timestamp.after.max.ms to 1 h and has min.insync.replicas as a cluster-wide dynamic "
                  "default")
_FEATURES_4 = ("features: Gregor reports group.version and share.version only; Kafka 4.4 also metadata.version, "
               "kraft.version (v4+), transaction.version, streams.version and eligible.leader.replicas.version")
_WHOLE_BATCHES = "Gregor returns whole batches only; Kafka pads with a partial trailing batch"

# version -> scenario -> why Gregor's answer differs from that Kafka's
KNOWN_DIFFERENCES: dict[str, dict[str, str]] = {
    "3.9.0": {
        "01_api_versions_v3": "features: Gregor finalizes group.version 1 and share.version 2 (the protocols "
                              "it serves), Kafka 3.9 only KRaft's metadata.version",
        "01_api_versions_v4": "features: Gregor supports and finalizes group.version and share.version, "
                              "Kafka 3.9 supports KRaft's metadata.version and kraft.version",
        "04_produce_null_records": "Kafka 3.9 never answers a null records field; Gregor answers INVALID_RECORD",
        "07_fetch_partial_trailing_batch": _WHOLE_BATCHES,
        "09_describe_configs_topic_with_overrides": "Kafka's reference broker had log.segment.bytes set "
                                                    "statically (a synonym of segment.bytes); Gregor lists "
                                                    "log.retention.hours as a synonym of retention.ms, Kafka "
                                                    "the topic's own value only",
        "09_describe_configs_broker": "Gregor describes its own broker settings, not Kafka's 314",
        "10_malformed_unsupported_api_version": "Fetch v18 is served, as by Kafka 4.4; Kafka 3.9 (up to v17) "
                                                "closes the connection",
    },
    "4.4.0": {
        "01_api_versions_unsupported_version": "Kafka 4.4 serves ApiVersions v5 (KIP-1242), Gregor up to v4: "
                                               "Gregor's UNSUPPORTED_VERSION answer gives 0-4, and it answers "
                                               "a v5 request so, where Kafka reads its body (missing here, so "
                                               "it closes the connection)",
        "01_api_versions_v3": _FEATURES_4,
        "01_api_versions_v4": _FEATURES_4,
        "03_create_topics_bad_replication_factor": "Kafka 4.4's message adds \"or some brokers have all their "
                                                   "log directories cordoned\" (its cordoned.log.dirs); "
                                                   "Gregor's is Kafka 3.9's",
        "03_create_topics_broker_defaults": _TOPIC_CONFIGS,
        "03_create_topics_mixed_and_duplicate": _TOPIC_CONFIGS,
        "03_create_topics_normal": _TOPIC_CONFIGS,
        "03_create_topics_validate_only": _TOPIC_CONFIGS,
        "03_create_topics_with_configs": _TOPIC_CONFIGS,
        "04_produce_v2": _KIP_896.format("Produce v0-2"),
        "04_produce_final_log_end_offsets": "partition 6 holds what 04_produce_v2 wrote with Produce v2, "
                                            "which Kafka 4.4 refused",
        "04_produce_null_records": "Kafka 4.4, as 3.9, never answers a null records field; Gregor answers "
                                   "INVALID_RECORD",
        "06_list_offsets_special_cases": "a partition listed twice: Kafka 4.4 answers it once "
                                         "(INVALID_REQUEST), Gregor once per entry, as Kafka 3.9",
        "06_list_offsets_v0": _KIP_896.format("ListOffsets v0"),
        "07_fetch_partial_trailing_batch": _WHOLE_BATCHES,
        "09_describe_configs_topic": _TOPIC_CONFIGS,
        "09_describe_configs_topic_with_overrides": _TOPIC_CONFIGS + "; Gregor lists log.retention.hours as "
                                                    "a synonym of retention.ms, Kafka 4.4 the topic's own "
                                                    "value only",
        "09_describe_configs_broker": "Gregor describes its own broker settings, not Kafka's",
        "10_malformed_unsupported_api_version": "Kafka 4.4 serves Produce v12 and ListOffsets v10; Gregor, "
                                                "whose Produce ends at v11 and ListOffsets at v9, closes the "
                                                "connection",
    },
}


def _scenarios() -> list[str]:
    """The probe's scenarios, as Kafka 3.9.0's recordings list them."""
    index_path = recorded(FIRST) / "index.json"
    if not index_path.exists():
        return []
    return [s["scenario"] for s in json.loads(index_path.read_text())["scenarios"]]


def _cases(leave_out: dict[str, set[str]] | None = None) -> list:
    """(version, scenario) for every version but a version's scenarios in `leave_out`; a Kafka 4.4.0
    id is prefixed with its version."""
    return [pytest.param(version, scenario, id=scenario if version == FIRST else f"{version}-{scenario}")
            for version in VERSIONS for scenario in _scenarios()
            if scenario not in (leave_out or {}).get(version, ())]


def _probe(broker, out: Path, label: str) -> Path:
    """Run every scenario against a started broker (stopped afterwards); the directory of answers."""
    try:
        proc = subprocess.run([sys.executable, str(REFERENCE / "kafka_probe.py"), "--bootstrap", broker.bootstrap,
                               "--out", str(out), "--label", label], check=False, capture_output=True, text=True,
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


def _live_fixture_name(version: str) -> str:
    return f"live_kafka_{version.replace('.', '_')}_answers"


def _live_answers(version: str):
    """A module fixture of Kafka `version`'s answers recorded live in this run (the full tier), one per
    version so that pytest probes each once (and keeps a failure): the JVM is started when a test of
    that version first needs it and stopped once probed, so one JVM runs at a time."""
    @pytest.fixture(scope="module", name=_live_fixture_name(version))
    def answers(tmp_path_factory) -> Path:
        tmp = tmp_path_factory.mktemp(f"kafka-{version}-probe")
        try:
            kafka = KafkaBroker(tmp / "kafka", version=version)
        except KafkaUnavailable as e:
            pytest.fail(f"the full tier probes a live Kafka {version}, and it cannot run: {e}")
        kafka.start()
        return _probe(kafka, tmp / "out", f"apache-kafka-{version}")
    return answers


live_kafka_3_9_0_answers = _live_answers("3.9.0")
live_kafka_4_4_0_answers = _live_answers("4.4.0")


def _live(version: str, request) -> Path:
    return request.getfixturevalue(_live_fixture_name(version))


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


def _assert_same_steps(actual: dict, expected: dict, both_live: bool = False) -> None:
    """The same steps. A measured wait (rounded to 100 ms) may run one step long on a loaded machine:
    the actual one, or either when both were measured in this run (Gregor against a live Kafka)."""
    assert len(actual["steps"]) == len(expected["steps"])
    for got, want in zip(actual["steps"], expected["steps"], strict=True):
        got, want = _comparable(got), _comparable(want)
        got_ms, want_ms = got.pop("elapsed_ms_rounded", None), want.pop("elapsed_ms_rounded", None)
        assert (got_ms is None) == (want_ms is None)
        if want_ms is not None:
            low = want_ms - 100 if both_live else want_ms
            assert low <= got_ms <= want_ms + 100, f"step {want.get('label')!r} waited {got_ms} ms, not {want_ms}"
        assert got == want, f"step {want.get('label')!r} differs"


@pytest.mark.parametrize(("kafka_version", "scenario"), _cases())
def test_matches_kafka_reference(kafka_version: str, scenario: str, probe_output: Path, request):
    """Gregor's answers are Kafka's: live in the full tier, the committed recordings per push."""
    reason = KNOWN_DIFFERENCES[kafka_version].get(scenario)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    kafka_answers = _live(kafka_version, request) if FULL else recorded(kafka_version)
    expected = json.loads((kafka_answers / f"{scenario}.json").read_text())
    assert expected["status"] == "ok", f"the probe failed against Kafka: {expected.get('traceback')}"
    produced_path = probe_output / f"{scenario}.json"
    assert produced_path.exists(), f"probe wrote no {scenario}.json"
    actual = json.loads(produced_path.read_text())
    assert actual["status"] == "ok", actual.get("traceback", actual["status"])
    _assert_same_steps(actual, expected, both_live=FULL)


# Scenarios whose answers list the broker's static settings: Kafka 3.9.0's reference broker's were not
# those the suite's Kafka starts with (tests/kit/kafka.py), so a live answer is not compared with its
# recording. Kafka 4.4.0's recordings were made by the suite's Kafka, and every scenario is compared.
STATIC_SETTINGS_SCENARIOS = {"3.9.0": {"09_describe_configs_topic_with_overrides", "09_describe_configs_broker"},
                             "4.4.0": set()}

if FULL:  # per push there is no live Kafka to compare with, and no test
    @pytest.mark.parametrize(("kafka_version", "scenario"), _cases(leave_out=STATIC_SETTINGS_SCENARIOS))
    def test_recordings_are_kafkas_answers(kafka_version: str, scenario: str, request):
        """The committed recording of each scenario is what a live Kafka of its version answers now. A
        drifted one is re-recorded in place (`git diff` shows it) and fails the run."""
        live_kafka_answers = _live(kafka_version, request)
        live = json.loads((live_kafka_answers / f"{scenario}.json").read_text())
        recorded_path = recorded(kafka_version) / f"{scenario}.json"
        try:
            _assert_same_steps(live, json.loads(recorded_path.read_text()))
        except AssertionError:
            shutil.copyfile(live_kafka_answers / f"{scenario}.json", recorded_path)
            raise
