"""SASL on the wire with tests/broker/wire.WireClient: SaslHandshake, then SaslAuthenticate rounds
(one for PLAIN, two for SCRAM), every answer kept so tests can look at each."""

from __future__ import annotations

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tests.kit.wire import WireClient

NONE, UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 0, 33, 58


def handshake(client: WireClient, mechanism: str, version: int = 1):
    return client.request(SaslHandshakeRequest[version](mechanism=mechanism))


def authenticate(client: WireClient, mechanism: str, user: str, password: str, version: int = 2) -> list:
    """Handshake and authenticate; the SaslAuthenticate answers in order, up to the first error."""
    assert handshake(client, mechanism).error_code == NONE
    if mechanism == "PLAIN":
        token = b"\0" + user.encode() + b"\0" + password.encode()
        return [client.request(SaslAuthenticateRequest[version](auth_bytes=token))]
    scram = ScramClient(user, password, mechanism)
    first = client.request(SaslAuthenticateRequest[version](auth_bytes=scram.first_message()))
    if first.error_code != NONE:
        return [first]
    scram.process_server_first_message(bytes(first.auth_bytes))
    return [first, client.request(SaslAuthenticateRequest[version](auth_bytes=scram.final_message()))]


def connect_as(address: str, mechanism: str, user: str, password: str) -> WireClient:
    """A connection authenticated as `user`."""
    client = WireClient(address)
    answers = authenticate(client, mechanism, user, password)
    assert answers[-1].error_code == NONE, answers[-1].error_message
    return client
