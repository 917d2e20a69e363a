"""connections.max.reauth.ms (KIP-368) against Gregor and a real Apache Kafka 3.9.0: the session
lifetime SaslAuthenticate v1+ answers, what becomes of a connection whose session expired, and
re-authentication on the same connection (issue 20)."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.metadata import MetadataRequest

from tests.kit.wire import WireClient
from tests.kit.both import GREGOR, KAFKA
from tests.security.brokers import MECHANISMS, PASSWORD, SASL_SETTINGS, USER, USERS, started
from tests.security.sasl_wire import NONE, SASL_AUTHENTICATION_FAILED, authenticate, connect_as

REAUTH_MS = 5000
OTHER, OTHER_PASSWORD = "bob", "bob-secret"


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def sasl(request, tmp_path_factory) -> str:
    settings = {**SASL_SETTINGS, "connections.max.reauth.ms": str(REAUTH_MS)}
    users = [*USERS, (OTHER, OTHER_PASSWORD, "SCRAM-SHA-256")]
    with started(request.param, tmp_path_factory.mktemp(request.param), settings, users) as b:
        yield b.listeners["SASL_PLAINTEXT"]


def _metadata_answered(client: WireClient) -> bool:
    client.send(MetadataRequest[1](topics=None))
    return client.receive_frame() is not None


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_last_sasl_authenticate_answer_carries_connections_max_reauth_ms(sasl, mechanism, version):
    client = WireClient(sasl)
    try:
        answers = authenticate(client, mechanism, USER, PASSWORD, version)
        # SCRAM's first round is not the end of authentication: no lifetime yet.
        assert [(a.error_code, a.session_lifetime_ms) for a in answers] == \
            [(NONE, 0)] * (len(answers) - 1) + [(NONE, REAUTH_MS)]
    finally:
        client.close()


def test_a_request_after_the_session_expired_closes_the_connection_without_an_answer(sasl):
    client = connect_as(sasl, "PLAIN", USER, PASSWORD)
    try:
        assert _metadata_answered(client)
        time.sleep(REAUTH_MS / 1000 + 0.5)  # time passing on purpose: the session expires
        assert not _metadata_answered(client)
    finally:
        client.close()


def test_reauthenticating_on_the_connection_starts_a_new_session(sasl):
    client = connect_as(sasl, "SCRAM-SHA-256", USER, PASSWORD)
    try:
        expiry = time.monotonic() + REAUTH_MS / 1000
        time.sleep(REAUTH_MS / 1000 / 2)  # time passing on purpose: half the first session
        again = authenticate(client, "SCRAM-SHA-256", USER, PASSWORD)
        assert (again[-1].error_code, again[-1].session_lifetime_ms) == (NONE, REAUTH_MS)
        time.sleep(max(0.0, expiry - time.monotonic()) + 0.5)  # time passing on purpose: past the first expiry
        assert _metadata_answered(client)
    finally:
        client.close()


def test_reauthenticating_as_another_user_is_refused_and_closes_the_connection(sasl):
    client = connect_as(sasl, "PLAIN", USER, PASSWORD)
    try:
        refused = authenticate(client, "PLAIN", OTHER, OTHER_PASSWORD)[-1]
        reason = f"Cannot change principals during re-authentication from User.{USER}: User.{OTHER}"
        assert (refused.error_code, refused.error_message) == (SASL_AUTHENTICATION_FAILED, reason)
        assert client.closed_by_peer()
    finally:
        client.close()
