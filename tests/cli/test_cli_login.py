"""A `gregor` command with a wrong password fails after one login, in one line saying
authentication failed with the broker's message (kafka-python alone retried the login for 10 s,
ten failed logins, then said the broker did not answer in time); the right password works."""

from __future__ import annotations

import time

import pytest

from tests.cli.conftest import assert_fails, gregor
from tests.kit.gregor import start_broker

USER, PASSWORD = "admin", "admin-secret"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = start_broker(tmp_path_factory.mktemp("cli-login"), users=[(USER, PASSWORD, "SCRAM-SHA-256")],
                          listeners="SASL_PLAINTEXT://127.0.0.1:0", **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN"})
    yield broker
    broker.stop()


def properties(tmp_path, mechanism: str, password: str) -> str:
    path = tmp_path / f"{mechanism}-{password}.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\nsasl.username={USER}\n"
                    f"sasl.password={password}\n")
    return str(path)


@pytest.mark.parametrize("mechanism, message", [
    ("SCRAM-SHA-256", "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                      "SCRAM-SHA-256"),
    ("PLAIN", "Authentication failed: Invalid username or password"),
])
def test_a_wrong_password_fails_at_once_after_one_login(sasl_broker, tmp_path, mechanism, message):
    before = sasl_broker.log().count("authentication from")
    started = time.monotonic()
    done = gregor("topic", "list", "--bootstrap", sasl_broker.listeners["SASL_PLAINTEXT"],
                  "--command-config", properties(tmp_path, mechanism, "wrong"))
    assert time.monotonic() - started < 5
    assert_fails(done, 1, f"authentication failed at {sasl_broker.listeners['SASL_PLAINTEXT']} as {USER} "
                          f"({mechanism}): {message}")
    assert sasl_broker.log().count("authentication from") - before == 1


def test_the_right_password_runs_the_command(sasl_broker, tmp_path):
    done = gregor("topic", "list", "--bootstrap", sasl_broker.listeners["SASL_PLAINTEXT"],
                  "--command-config", properties(tmp_path, "SCRAM-SHA-256", PASSWORD))
    assert (done.returncode, done.stdout.split()) == (0, ["NAME", "PARTITIONS", "REPLICAS"]), done.stderr
