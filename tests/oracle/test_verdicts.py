"""The Kafka-verdict plugin (tests/kit/verdicts.py) on a scenario of its own: a Kafka cell runs live
and is recorded, is then answered by its verdict, runs again when its test changes, and a full run
that finds another outcome under the same key fails."""

from __future__ import annotations

import json

import pytest

from tests.kit.gregor import ROOT

pytest_plugins = ["pytester"]

SCENARIO = '''
import pytest

@pytest.fixture(params=["gregor", "apache-kafka"])
def broker(request):
    return request.param

def test_answers(broker):
    assert {outcome}
'''


@pytest.fixture
def run(pytester, monkeypatch, tmp_path):
    verdicts = tmp_path / "verdicts.json"
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("GREGOR_KAFKA_VERDICTS", str(verdicts))

    def go(outcome: str = "True", tier: str = "push"):
        pytester.makepyfile(test_scenario=SCENARIO.format(outcome=outcome))
        monkeypatch.setenv("GREGOR_TIER", tier)
        result = pytester.runpytest_subprocess("-p", "tests.kit.verdicts", "-p", "no:cacheprovider")
        return result, json.loads(verdicts.read_text()) if verdicts.exists() else {}

    return go


def test_a_cell_without_a_verdict_runs_live_and_is_recorded_then_answered(run):
    result, recorded = run()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*Kafka cells: 0 answered*1 run live*"])
    assert [v["outcome"] for v in recorded.values()] == ["passed"]
    assert [v["test"] for v in recorded.values()] == ["test_scenario.py::test_answers[apache-kafka]"]

    result, again = run()
    result.assert_outcomes(passed=1, deselected=1)  # Gregor's cell ran, Kafka's was answered
    result.stdout.fnmatch_lines(["*Kafka cells: 1 answered*0 run live*"])
    assert again == recorded


def test_a_changed_test_runs_live_again_and_replaces_its_old_verdict(run):
    _, before = run()
    result, after = run(outcome="broker")  # another source: another key
    result.assert_outcomes(passed=2)
    assert len(after) == 1 and after.keys() != before.keys()


def test_a_failed_cell_is_recorded_but_never_answers_a_push(run):
    result, recorded = run(outcome="broker == 'gregor'")
    result.assert_outcomes(passed=1, failed=1)
    assert [v["outcome"] for v in recorded.values()] == ["failed"]
    result, _ = run(outcome="broker == 'gregor'")
    result.assert_outcomes(passed=1, failed=1)  # run live again, not answered


def test_the_full_tier_runs_every_cell_and_fails_on_drift(run, tmp_path):
    _, recorded = run()
    [key] = recorded
    recorded[key]["outcome"] = "skipped"  # as if Kafka had answered otherwise when it was recorded
    (tmp_path / "verdicts.json").write_text(json.dumps(recorded))
    result, rerecorded = run(tier="full")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*KAFKA VERDICT DRIFT*recorded skipped, now passed*"])
    assert result.ret == 1
    assert rerecorded[key]["outcome"] == "passed"
