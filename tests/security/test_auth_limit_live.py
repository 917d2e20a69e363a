"""Failed logins on a live Gregor: each is answered with SASL_AUTHENTICATION_FAILED after
connection.failed.authentication.delay.ms, as Kafka answers; once one user has failed
failed.authentication.limit times from one address within failed.authentication.window.ms, its
further failures are answered more slowly, while the right password logs in at once, and other
users and addresses are never slowed. Nothing is refused at connect. Each test connects from
addresses of its own: every 127.0.0.0/8 address reaches a loopback listener."""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tests.kit.wire import WireClient
from tests.kit.gregor import start_broker
from tests.security.brokers import PASSWORD, USER, USERS
from tests.security.sasl_wire import NONE, SASL_AUTHENTICATION_FAILED, authenticate
from tests.security.tls import (
    TlsWireClient,
    broker_settings,
    client_context,
    make_certificates,
    read_until_closed,
)

AUTHENTICATED, FAILED, CLOSED = "authenticated", "SASL_AUTHENTICATION_FAILED", "closed unanswered"
SERVED = "answered"
WRONG = "not-the-password"
LIMIT, WINDOW_MS = 3, 4000
DELAY_S = 0.2  # connection.failed.authentication.delay.ms
MAX_TOKEN = 1024  # sasl.server.max.receive.size


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(tmp_path_factory.mktemp("auth-limit"), users=USERS,
                     listeners="SASL_PLAINTEXT://127.0.0.1:0", **{
                         "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                         "sasl.server.max.receive.size": str(MAX_TOKEN),
                         "failed.authentication.limit": str(LIMIT),
                         "failed.authentication.window.ms": str(WINDOW_MS),
                         "connection.failed.authentication.delay.ms": str(int(DELAY_S * 1000))})
    yield b
    b.stop()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def plain(broker, source: str, password: str, user: str = USER) -> str:
    """A new connection from `source` authenticating with PLAIN: what became of it."""
    client = WireClient(broker.listeners["SASL_PLAINTEXT"], source=source)
    try:
        client.send(SaslHandshakeRequest[1](mechanism="PLAIN"))
        if client.receive_frame() is None:
            return CLOSED
        token = b"\0" + user.encode() + b"\0" + password.encode()
        answer = client.request(SaslAuthenticateRequest[2](auth_bytes=token))
        return {NONE: AUTHENTICATED, SASL_AUTHENTICATION_FAILED: FAILED}[answer.error_code]
    except ConnectionError:
        return CLOSED
    finally:
        client.close()


def timed(broker, source: str, password: str, user: str = USER) -> tuple[str, float]:
    started = time.monotonic()
    return plain(broker, source, password, user), time.monotonic() - started


def fail_limit_times(broker, source: str) -> None:
    assert [plain(broker, source, WRONG) for _ in range(LIMIT)] == [FAILED] * LIMIT


def test_after_limit_wrong_passwords_the_right_one_logs_in_at_once(broker):
    fail_limit_times(broker, "127.0.0.11")
    outcome, took = timed(broker, "127.0.0.11", PASSWORD)
    assert outcome == AUTHENTICATED and took < 0.1  # nothing waits on a correct password


def test_past_the_limit_a_wrong_password_is_answered_with_the_sasl_error_ever_more_slowly(broker):
    fail_limit_times(broker, "127.0.0.12")
    first, second = timed(broker, "127.0.0.12", WRONG), timed(broker, "127.0.0.12", WRONG)
    assert first[0] == second[0] == FAILED  # the client learns why, as from Kafka
    assert first[1] >= 2 * DELAY_S * 0.9 and second[1] >= 4 * DELAY_S * 0.9
    log = broker.log()
    warnings = re.findall(r"WARNING gregor\.sasl: (failed\.authentication\.limit .* from 127\.0\.0\.12:.*)", log)
    assert len(warnings) == 1, warnings
    assert f"({LIMIT} within {WINDOW_MS} ms) reached for user '{USER}'" in warnings[0]
    assert "a correct password logs in at once" in warnings[0]
    assert PASSWORD not in log and WRONG not in log


def test_failures_with_any_mechanism_count_for_their_user(broker):
    for _ in range(LIMIT):
        client = WireClient(broker.listeners["SASL_PLAINTEXT"], source="127.0.0.13")
        answers = authenticate(client, "SCRAM-SHA-256", USER, WRONG)
        client.close()
        assert answers[-1].error_code == SASL_AUTHENTICATION_FAILED
    outcome, took = timed(broker, "127.0.0.13", WRONG)
    assert outcome == FAILED and took >= 2 * DELAY_S * 0.9
    assert timed(broker, "127.0.0.13", PASSWORD)[0] == AUTHENTICATED


def test_other_users_and_other_addresses_are_not_slowed(broker):
    fail_limit_times(broker, "127.0.0.14")
    outcome, took = timed(broker, "127.0.0.14", WRONG, user="someone-else")  # behind the same NAT
    assert outcome == FAILED and took < 2 * DELAY_S
    outcome, took = timed(broker, "127.0.0.15", WRONG)
    assert outcome == FAILED and took < 2 * DELAY_S


def test_a_success_forgets_the_users_failures(broker):
    fail_limit_times(broker, "127.0.0.16")
    assert plain(broker, "127.0.0.16", PASSWORD) == AUTHENTICATED
    outcome, took = timed(broker, "127.0.0.16", WRONG)
    assert outcome == FAILED and took < 2 * DELAY_S


def test_nothing_is_refused_at_connect(broker):
    for _ in range(3 * LIMIT):
        assert plain(broker, "127.0.0.17", WRONG) == FAILED
    assert not WireClient(broker.listeners["SASL_PLAINTEXT"], source="127.0.0.17").closed_by_peer(0.5)


# A refused client certificate on an mTLS listener is a failed authentication too.

@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("auth-limit-certs"))


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory, certs):
    b = start_broker(tmp_path_factory.mktemp("auth-limit-mtls"), listeners="SSL://127.0.0.1:0", **{
        **broker_settings(certs, client_auth="required"),
        "failed.authentication.limit": "2", "failed.authentication.window.ms": "60000"})
    yield b
    b.stop()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def tls(broker, certs, source: str, *, certificate: bool) -> str:
    """A new TLS connection from `source`, with the client certificate or none, sending ApiVersions."""
    shown = (certs.client_cert, certs.client_key) if certificate else None
    try:
        client = TlsWireClient(broker.listeners["SSL"], client_context(certs, certificate=shown), source=source)
    except (ssl.SSLError, ConnectionError):
        return CLOSED
    try:
        client.send(ApiVersionsRequest[3](client_software_name="gregor-tests", client_software_version="1"))
        return CLOSED if client.receive_frame() is None else SERVED
    except (ssl.SSLError, ConnectionError):
        return CLOSED
    finally:
        client.close()


def test_refused_client_certificates_never_keep_a_good_one_out(mtls_broker, certs):
    assert [tls(mtls_broker, certs, "127.0.0.21", certificate=False) for _ in range(4)] == [CLOSED] * 4
    assert tls(mtls_broker, certs, "127.0.0.21", certificate=True) == SERVED
    assert "refusing connection from 127.0.0.21" not in mtls_broker.log()


def test_plaintext_bytes_on_the_tls_port_are_not_failed_authentications(mtls_broker, certs):
    host, port = mtls_broker.listeners["SSL"].rsplit(":", 1)
    for _ in range(3):
        with socket.create_connection((host, int(port)), source_address=("127.0.0.23", 0)) as sock:
            sock.sendall(b"\0\0\0\x10not a ClientHello")
            assert read_until_closed(sock, 10)[0]
    assert tls(mtls_broker, certs, "127.0.0.23", certificate=True) == SERVED
