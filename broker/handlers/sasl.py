"""SASL authentication and SCRAM credentials on the wire: SaslHandshake, SaslAuthenticate,
DescribeUserScramCredentials, AlterUserScramCredentials (KIP-43, KIP-152, KIP-368, KIP-554).

The connection's session (broker/net/listeners.py's SaslSession) says which requests it may
send; the mechanisms are broker/security/sasl.py's. Credentials are records of the state topic
(store/state.py, key `C` + mechanism + user; value broker/security/sasl.py's encoding): salted, never
the password, durable before AlterUserScramCredentials is answered. Password hashing (PBKDF2,
4,096 iterations or more) runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio
from kafka.protocol.admin import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.broker import Broker
from broker.net.listeners import SaslSession
from broker.net.answers import CloseAfter
from broker.security.auth_limit import MAX_WAIT_MS
from broker.net.peer import peer_host, sasl_session
from broker.security.sasl import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    AuthenticationFailed,
    Authenticator,
    ScramCredential,
    credential_from_salted,
    decode_credential,
    encode_credential,
    stored_credentials,
)
from protocol.codec import Request
from protocol.errors import ErrorCode
from store import StoreError
from store.state import CREDENTIAL, credential_key

log = logging.getLogger("gregor.sasl")
ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 34, 33, 58
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93


@dataclass(slots=True)
class AuthenticationFailure(CloseAfter):
    """A failed login's answer, after which the connection closes."""

    body: Any


async def handle_sasl_handshake(broker: Broker, request: Request):
    version = request.header.api_version
    session = sasl_session.get()
    if session is None or session.state == "authenticate":  # a PLAINTEXT listener, or a second handshake
        return SaslHandshakeResponse[version](error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(session.enabled)
    mechanism = request.body.mechanism
    if mechanism not in session.enabled:  # Kafka answers, then closes the connection
        log.info("client %s asked for SASL mechanism %r; enabled: %s", peer_host.get(), mechanism, enabled)
        return AuthenticationFailure(SaslHandshakeResponse[version](error_code=UNSUPPORTED_SASL_MECHANISM,
                                                                    mechanisms=enabled))
    session.reauthenticating = session.state == "done"
    session.mechanism = mechanism
    session.authenticator = Authenticator(mechanism, stored_credentials(broker.store), reauthenticating=session.reauthenticating)
    session.state = "authenticate"
    session.raw_tokens = version == 0  # KIP-43: bare tokens follow; v1: SaslAuthenticate requests
    return SaslHandshakeResponse[version](error_code=ErrorCode.NONE, mechanisms=enabled)


async def handle_sasl_authenticate(broker: Broker, request: Request):
    version = request.header.api_version
    session = sasl_session.get()
    if session is None or session.state != "authenticate":
        return SaslAuthenticateResponse[version](
            error_code=ILLEGAL_SASL_STATE, error_message="SaslAuthenticate request received after successful "
            "authentication" if session is None or session.state == "done" else "Unexpected SaslAuthenticate request",
            auth_bytes=b"", session_lifetime_ms=0)
    auth_bytes = bytes(request.body.auth_bytes)
    if len(auth_bytes) > broker.config["sasl.server.max.receive.size"]:
        # Kafka: "Failing SASL authentication due to invalid receive size"; it closes, answering nothing
        log.warning("closing %s: SASL token of %d bytes before authentication", peer_host.get(), len(auth_bytes))
        _count_failure(broker)
        return AuthenticationFailure(None)
    try:
        token = await authenticate(broker, session, auth_bytes)
    except AuthenticationFailed as exc:
        return AuthenticationFailure(SaslAuthenticateResponse[version](
            error_code=exc.error_code, error_message=str(exc), auth_bytes=b"", session_lifetime_ms=0))
    lifetime = session.lifetime_ms if session.state == "done" else 0
    return SaslAuthenticateResponse[version](error_code=ErrorCode.NONE, error_message=None, auth_bytes=token,
                                             session_lifetime_ms=lifetime)


async def authenticate(broker: Broker, session: SaslSession, token: bytes) -> bytes:
    """One step of the session's exchange; the session is `done` once it succeeded. A failure
    is answered only after connection.failed.authentication.delay.ms (Kafka's delay, which
    slows password guessing), longer once its identity passed failed.authentication.limit
    (broker/security/auth_limit.py), and logged without the token."""
    authenticator: Authenticator = session.authenticator  # type: ignore[assignment]
    try:
        if len(token) > broker.config["sasl.server.max.receive.size"]:
            raise AuthenticationFailed("Failing SASL authentication due to invalid receive size")
        out = await trio.to_thread.run_sync(authenticator.step, token)
        if authenticator.done:
            user = authenticator.principal
            if session.reauthenticating and user != session.user:
                raise AuthenticationFailed(f"Cannot change principals during re-authentication from User.{session.user}: "
                                           f"User.{user}")
            session.user, session.state, session.raw_tokens, session.reauthenticating = user, "done", False, False
            lifetime = session.lifetime_ms
            session.expires_ms = trio.current_time() * 1000 + lifetime if lifetime else None
            log.info("client %s authenticated as User:%s (%s)", peer_host.get(), user, session.mechanism)
            broker.failed_logins.succeeded(peer_host.get().removeprefix("/"), user)
        return out
    except AuthenticationFailed as exc:
        session.state = "failed"
        address, user = peer_host.get().removeprefix("/"), authenticator.claimed
        log.warning("SASL %s authentication from %s failed: %s", session.mechanism, peer_host.get(), exc.reason)
        throttle = broker.failed_logins.failed(address, user, trio.current_time() * 1000)
        if throttle.first:
            log.warning("failed.authentication.limit (%d within %d ms) reached for user %r from %s: its failed "
                        "logins are answered more slowly (up to %d ms); a correct password logs in at once",
                        broker.failed_logins.limit, broker.failed_logins.window_ms, user, address, MAX_WAIT_MS)
        await trio.sleep(throttle.wait_ms / 1000)
        raise


# ---- SCRAM credentials (KIP-554) ------------------------------------------------------------
def _credentials(broker: Broker) -> dict[str, dict[int, ScramCredential]]:
    """user -> {mechanism code: credential}, from the state topic."""
    out: dict[str, dict[int, ScramCredential]] = {}
    for key, value in broker.store.state_items(CREDENTIAL):
        code, user = key[1], key[2:].decode()
        if code in MECHANISM_NAMES:
            out.setdefault(user, {})[code] = decode_credential(MECHANISM_NAMES[code], value)
    return out


async def handle_describe_user_scram_credentials(broker: Broker, request: Request):
    version = request.header.api_version
    R = DescribeUserScramCredentialsResponse[version]
    Result = R.DescribeUserScramCredentialsResult
    if not broker.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 error_message="Cluster authorization failed.", results=[])
    known = _credentials(broker)
    asked = None if request.body.users is None else [u.name for u in request.body.users]
    results = []
    if asked is None or not asked:  # null or empty: every user that has a credential
        names = sorted(known)
        duplicates: set[str] = set()
    else:
        names = list(dict.fromkeys(asked))
        duplicates = {n for n in asked if asked.count(n) > 1}
    for name in names:
        if name in duplicates:
            results.append(Result(user=name, error_code=DUPLICATE_RESOURCE,
                                  error_message=f"Cannot describe SCRAM credentials for the same user twice in a "
                                                f"single request: {name}", credential_infos=[]))
        elif name not in known:
            results.append(Result(user=name, error_code=RESOURCE_NOT_FOUND,
                                  error_message=f"Attempt to describe a user credential that does not exist: {name}",
                                  credential_infos=[]))
        else:
            infos = [Result.CredentialInfo(mechanism=code, iterations=c.iterations)
                     for code, c in sorted(known[name].items())]
            results.append(Result(user=name, error_code=0, error_message=None, credential_infos=infos))
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


async def handle_alter_user_scram_credentials(broker: Broker, request: Request):
    version = request.header.api_version
    R = AlterUserScramCredentialsResponse[version]
    body = request.body
    users = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
    if not broker.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, results=[R.AlterUserScramCredentialsResult(
            user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.") for user in dict.fromkeys(users)])
    twice = {u for u in users if users.count(u) > 1}
    known = _credentials(broker)
    errors: dict[str, tuple[int, str]] = {}
    records: list[tuple[bytes, bytes | None]] = []
    for d in body.deletions:
        problem = _problem(d.name, d.mechanism, twice)
        if problem is None and d.mechanism not in known.get(d.name, {}):
            problem = (RESOURCE_NOT_FOUND, f"Attempt to delete a user credential that does not exist: {d.name}")
        if problem:
            errors[d.name] = problem
        else:
            records.append((credential_key(d.mechanism, d.name), None))
    hashing = []
    for u in body.upsertions:
        problem = _problem(u.name, u.mechanism, twice)
        if problem is None and not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            problem = (UNACCEPTABLE_CREDENTIAL, "Too few iterations" if u.iterations < MIN_ITERATIONS
                       else "Too many iterations")
        if problem is None and not u.salt:
            problem = (UNACCEPTABLE_CREDENTIAL, "Salt must not be empty")
        if problem is None and not u.salted_password:
            problem = (UNACCEPTABLE_CREDENTIAL, "Salted password must not be empty")
        if problem:
            errors[u.name] = problem
        else:
            hashing.append(u)

    def derive() -> list[tuple[bytes, bytes]]:
        return [(credential_key(u.mechanism, u.name), encode_credential(credential_from_salted(
            MECHANISM_NAMES[u.mechanism], bytes(u.salt), u.iterations, bytes(u.salted_password)))) for u in hashing]

    records += await trio.to_thread.run_sync(derive)
    if records:
        try:
            await broker.write_security(records)
        except StoreError as exc:
            log.error("SCRAM credential change refused: %s", exc)
            for key, _ in records:
                errors[key[2:].decode()] = (ErrorCode.KAFKA_STORAGE_ERROR, f"credential not stored: {exc}")
    results = [R.AlterUserScramCredentialsResult(user=user, error_code=errors.get(user, (0, None))[0],
                                                  error_message=errors.get(user, (0, None))[1])
               for user in dict.fromkeys(users)]
    return R(throttle_time_ms=0, results=results)


def _problem(user: str, mechanism: int, twice: set[str]) -> tuple[int, str] | None:
    if not user:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if user in twice:
        return DUPLICATE_RESOURCE, f"A user credential cannot be altered twice in the same request: {user}"
    return None

