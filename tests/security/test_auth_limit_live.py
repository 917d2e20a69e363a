"""failed.authentication.limit on a live Gregor (a Gregor addition; Kafka only delays each failed
answer): once an address has failed to authenticate `limit` times within
failed.authentication.window.ms, its new connections are closed unanswered, whatever they would
send, until those failures leave the window; other addresses are served all along. Each test
connects from addresses of its own: every 127.0.0.0/8 address reaches a loopback listener."""

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
from tests.security.sasl_wire import NONE, SASL_AUTHENTICATION_FAILED, authenticate, handshake
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
MAX_TOKEN = 1024  # sasl.server.max.receive.size


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(tmp_path_factory.mktemp("auth-limit"), users=USERS,
                     listeners="SASL_PLAINTEXT://127.0.0.1:0", **{
                         "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                         "sasl.server.max.receive.size": str(MAX_TOKEN),
                         "failed.authentication.limit": str(LIMIT),
                         "failed.authentication.window.ms": str(WINDOW_MS)})
    yield b
    b.stop()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def plain(broker, source: str, password: str) -> str:
    """A new connection from `source` authenticating with PLAIN: what became of it."""
    client = WireClient(broker.listeners["SASL_PLAINTEXT"], source=source)
    try:
        client.send(SaslHandshakeRequest[1](mechanism="PLAIN"))
        if client.receive_frame() is None:
            return CLOSED
        token = b"\0" + USER.encode() + b"\0" + password.encode()
        answer = client.request(SaslAuthenticateRequest[2](auth_bytes=token))
        return {NONE: AUTHENTICATED, SASL_AUTHENTICATION_FAILED: FAILED}[answer.error_code]
    except ConnectionError:
        return CLOSED
    finally:
        client.close()


def fail_limit_times(broker, source: str) -> None:
    assert [plain(broker, source, WRONG) for _ in range(LIMIT)] == [FAILED] * LIMIT


def test_after_limit_wrong_passwords_the_next_connection_is_closed_unanswered_even_with_the_right_one(broker):
    fail_limit_times(broker, "127.0.0.11")
    assert plain(broker, "127.0.0.11", PASSWORD) == CLOSED
    assert WireClient(broker.listeners["SASL_PLAINTEXT"], source="127.0.0.11").closed_by_peer()


def test_a_refused_address_is_reported_once_and_no_password_reaches_the_log(broker):
    fail_limit_times(broker, "127.0.0.12")
    assert [plain(broker, "127.0.0.12", PASSWORD) for _ in range(3)] == [CLOSED] * 3
    log = broker.log()
    warnings = re.findall(r"WARNING gregor\.connection: refusing connection from 127\.0\.0\.12:\d+: (.*)", log)
    assert len(warnings) == 1
    assert "failed.authentication.limit (3 within 4000 ms) reached for 127.0.0.12" in warnings[0]
    assert PASSWORD not in log and WRONG not in log


def test_failures_with_any_mechanism_count(broker):
    for _ in range(LIMIT - 1):
        client = WireClient(broker.listeners["SASL_PLAINTEXT"], source="127.0.0.13")
        answers = authenticate(client, "SCRAM-SHA-256", USER, WRONG)
        client.close()
        assert answers[-1].error_code == SASL_AUTHENTICATION_FAILED
    assert plain(broker, "127.0.0.13", WRONG) == FAILED
    assert plain(broker, "127.0.0.13", PASSWORD) == CLOSED


def test_oversized_sasl_tokens_count(broker):
    for _ in range(LIMIT):
        client = WireClient(broker.listeners["SASL_PLAINTEXT"], source="127.0.0.18")
        assert handshake(client, "PLAIN").error_code == NONE
        client.send(SaslAuthenticateRequest[2](auth_bytes=b"x" * (MAX_TOKEN + 1)))
        assert client.receive_frame() is None  # closed unanswered, as Kafka closes it
        client.close()
    assert plain(broker, "127.0.0.18", PASSWORD) == CLOSED


def test_other_addresses_are_served_while_one_is_refused(broker):
    fail_limit_times(broker, "127.0.0.14")
    assert plain(broker, "127.0.0.14", PASSWORD) == CLOSED
    assert plain(broker, "127.0.0.15", PASSWORD) == AUTHENTICATED
    assert plain(broker, "127.0.0.15", WRONG) == FAILED  # its own count starts at one


def test_a_success_does_not_reset_the_count(broker):
    assert plain(broker, "127.0.0.16", WRONG) == FAILED
    assert plain(broker, "127.0.0.16", PASSWORD) == AUTHENTICATED
    assert [plain(broker, "127.0.0.16", WRONG) for _ in range(LIMIT - 1)] == [FAILED] * (LIMIT - 1)
    assert plain(broker, "127.0.0.16", PASSWORD) == CLOSED


def test_the_address_is_served_again_once_its_failures_leave_the_window(broker):
    fail_limit_times(broker, "127.0.0.17")
    assert plain(broker, "127.0.0.17", PASSWORD) == CLOSED
    # time passing on purpose: the failures leave the window (the broker counted the last failure
    # before it answered it)
    time.sleep(WINDOW_MS / 1000 + 0.3)
    assert plain(broker, "127.0.0.17", PASSWORD) == AUTHENTICATED


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


def test_refused_client_certificates_count_and_then_even_a_good_one_is_closed(mtls_broker, certs):
    assert [tls(mtls_broker, certs, "127.0.0.21", certificate=False) for _ in range(2)] == [CLOSED] * 2
    assert tls(mtls_broker, certs, "127.0.0.21", certificate=True) == CLOSED
    assert tls(mtls_broker, certs, "127.0.0.22", certificate=True) == SERVED
    assert "refusing connection from 127.0.0.21" in mtls_broker.log()


def test_plaintext_bytes_on_the_tls_port_are_not_failed_authentications(mtls_broker, certs):
    host, port = mtls_broker.listeners["SSL"].rsplit(":", 1)
    for _ in range(3):
        with socket.create_connection((host, int(port)), source_address=("127.0.0.23", 0)) as sock:
            sock.sendall(b"\0\0\0\x10not a ClientHello")
            assert read_until_closed(sock, 10)[0]
    assert tls(mtls_broker, certs, "127.0.0.23", certificate=True) == SERVED
