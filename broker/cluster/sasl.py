"""SASL between a cluster's nodes: the replication port (the commitlog's shipping, and other
groups' transaction markers) when security.inter.broker.protocol is SASL_PLAINTEXT or SASL_SSL
(docs/replication.md, Security between nodes).

The connecting node (a follower, or another group's transaction coordinator) logs in as the user
of its `sasl.jaas.config`, with `sasl.mechanism.inter.broker.protocol` (PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512), before anything else is said on the connection, after TLS's handshake with
SASL_SSL. The accepting node checks it as a SASL listener checks a client: broker/security/sasl.py's
Authenticator against the SCRAM credentials in its commitlog (the same users as its listeners,
created with `gregor user add` or AlterUserScramCredentials), and, with an authorizer, wants
`User:<name>` allowed ClusterAction on the cluster, as Kafka asks of its inter-broker principal.

The exchange, big-endian (Gregor's own, between Gregor nodes only; Kafka's brokers run SASL in
SaslHandshake and SaslAuthenticate requests on a listener):
  connecting -> accepting, once:  LOGIN   magic "GRSA" | mechanism length u8 | mechanism
  connecting -> accepting:        TOKEN   length i32 | the client's SASL token
  accepting -> connecting:        ANSWER  status i8 (0: go on, 1: refused, 2: logged in) | length i32 |
                                          the server's token, or (refused) why
PLAIN takes one TOKEN, SCRAM two. Then the connection carries what it would without SASL.

The client side's SCRAM is kafka-python's ScramClient (kafka.net.sasl.scram); PLAIN's one token
is RFC 4616's message, written here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio
from kafka.net.sasl.scram import ScramClient

from broker.net.listeners import ListenerError
from broker.cluster.tls import HANDSHAKE_TIMEOUT_S, _refused
from broker.security.sasl import MECHANISMS, AuthenticationFailed, Authenticator, ScramCredential, jaas_login

MAGIC = b"GRSA"
LOGIN = struct.Struct(">4sB")
TOKEN = struct.Struct(">i")
ANSWER = struct.Struct(">bi")
GO_ON, REFUSED, LOGGED_IN = 0, 1, 2
MAX_TOKEN = 1 << 16  # a PLAIN or SCRAM token is well under 1 KiB; what is bigger is not a node
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


class AuthenticationRefused(trio.BrokenResourceError):
    """The other node refused this node's SASL login (or it could not be made): the follower logs
    it and tries again, as after a failed TLS handshake."""


@dataclass(frozen=True)
class NodeSasl:
    mechanism: str  # what this node logs in with
    username: str
    password: str = field(repr=False)
    accepted: tuple[str, ...]  # what this node's replication port accepts
    failure_delay_s: float  # connection.failed.authentication.delay.ms: a refusal is answered after it


def login_settings(values: Mapping[str, Any]) -> NodeSasl | None:
    """What security.inter.broker.protocol=SASL_* asks for (None: no SASL); raises ListenerError
    with one line when the settings cannot log a node in."""
    protocol = values["security.inter.broker.protocol"].strip().upper()
    if not protocol.startswith("SASL_"):
        return None
    mechanism = values["sasl.mechanism.inter.broker.protocol"].strip().upper()
    if mechanism not in MECHANISMS:
        raise ListenerError(f"sasl.mechanism.inter.broker.protocol={mechanism}: Gregor's nodes log in with "
                            f"{', '.join(MECHANISMS)} ({protocol} between nodes)")
    login = jaas_login(values["sasl.jaas.config"])
    if login is None:
        raise ListenerError(f"security.inter.broker.protocol={protocol} needs sasl.jaas.config: "
                            f'{LOGIN_MODULES[mechanism]} required username="NODE-USER" password="...";')
    module, options = login
    if module != LOGIN_MODULES[mechanism]:
        raise ListenerError(f"sasl.jaas.config names {module}; {mechanism} logs in with {LOGIN_MODULES[mechanism]}")
    if not options.get("username") or "password" not in options:
        raise ListenerError("sasl.jaas.config needs username=\"...\" and password=\"...\" (this node's user)")
    enabled = [m.strip().upper() for m in values["sasl.enabled.mechanisms"].split(",") if m.strip()]
    accepted = tuple(dict.fromkeys([mechanism, *(m for m in enabled if m in MECHANISMS)]))
    return NodeSasl(mechanism, options["username"], options["password"], accepted,
                    values["connection.failed.authentication.delay.ms"] / 1000)


async def _receive_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    """replication.receive_exactly's loop, here because broker/config.py checks these settings at
    import of every node (config -> node_sasl), and replication imports the broker, hence config."""
    buf = bytearray()
    while len(buf) < size:
        chunk = await stream.receive_some(size - len(buf))
        if not chunk:
            raise trio.BrokenResourceError("the peer closed the connection during the SASL login")
        buf += chunk
    return bytes(buf)


async def _token(stream: trio.abc.ReceiveStream) -> bytes:
    (size,) = TOKEN.unpack(await _receive_exactly(stream, TOKEN.size))
    if not 0 <= size <= MAX_TOKEN:
        raise ValueError(f"a SASL token of {size} bytes")
    return await _receive_exactly(stream, size)


# ---- the accepting node -------------------------------------------------------------------
async def accept(sasl: NodeSasl, stream: trio.abc.Stream, host: str,
                 lookup: Callable[[str, str], ScramCredential | None],
                 allowed: Callable[[str, str], bool], failed: Callable[[str], None]) -> str | None:
    """The SASL login that opens a connection to the replication port: the principal it logged in
    as ("User:<name>"), or None (logged, the connection then closed by the caller) when it fails
    or `allowed(principal, host)` refuses. Wrong credentials are also a failed authentication of
    the host: `failed(host)` (failed.authentication.limit), as at a SASL listener."""
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            magic, length = LOGIN.unpack(await _receive_exactly(stream, LOGIN.size))
            if magic != MAGIC:
                _refused(host, f"no SASL login (it began with {magic!r}): every node of the cluster needs "
                               "security.inter.broker.protocol=SASL_PLAINTEXT or SASL_SSL alike")
                return None
            mechanism = (await _receive_exactly(stream, length)).decode(errors="replace")
            token = await _token(stream)  # sent with LOGIN: read before any answer, so a refusal is read
            if mechanism not in sasl.accepted:
                await _refuse(sasl, stream, host, f"mechanism {mechanism!r} is not one this node accepts "
                                                  f"({', '.join(sasl.accepted)})")
                return None
            authenticator = Authenticator(mechanism, lookup)
            while True:
                try:
                    answer = await trio.to_thread.run_sync(authenticator.step, token)  # PBKDF2: milliseconds
                except AuthenticationFailed as exc:
                    failed(host)
                    await _refuse(sasl, stream, host, str(exc), exc.reason)
                    return None
                if not authenticator.done:
                    await stream.send_all(ANSWER.pack(GO_ON, len(answer)) + answer)
                    token = await _token(stream)
                    continue
                principal = f"User:{authenticator.principal}"
                if not allowed(principal, host):
                    await _refuse(sasl, stream, host, f"principal {principal} is not allowed "
                                                      "ClusterAction on the cluster (super.users or an ACL)")
                    return None
                await stream.send_all(ANSWER.pack(LOGGED_IN, len(answer)) + answer)
                return principal
    except trio.TooSlowError:
        _refused(host, "no SASL login within 10 s")
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ValueError) as exc:
        _refused(host, f"SASL login failed ({exc})")
    return None


async def _refuse(sasl: NodeSasl, stream: trio.abc.Stream, host: str, why: str, reason: str | None = None) -> None:
    """Answer a failed login after connection.failed.authentication.delay.ms (as a listener does:
    it slows password guessing), and log it once per peer and reason."""
    _refused(host, f"SASL login failed: {reason or why}")
    await trio.sleep(sasl.failure_delay_s)
    text = why.encode()
    try:
        await stream.send_all(ANSWER.pack(REFUSED, len(text)) + text)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


# ---- the connecting node ------------------------------------------------------------------
def _scram_name(user: str) -> str:
    """RFC 5802's saslname: ',' and '=' escaped (kafka-python's ScramClient sends the name as given)."""
    return user.replace("=", "=3D").replace(",", "=2C")


async def login(sasl: NodeSasl, stream: trio.abc.Stream, where: str) -> None:
    """Log in on a fresh connection to `where`'s replication port; raises AuthenticationRefused."""
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            mechanism = sasl.mechanism.encode()
            if sasl.mechanism == "PLAIN":
                steps = [lambda _: b"\0" + sasl.username.encode() + b"\0" + sasl.password.encode()]
            else:
                scram = ScramClient(_scram_name(sasl.username), sasl.password, sasl.mechanism)
                steps = [lambda _: scram.first_message(), _scram_final(scram)]
            await stream.send_all(LOGIN.pack(MAGIC, len(mechanism)) + mechanism)
            answer = b""
            for step in steps:
                token = await trio.to_thread.run_sync(step, answer)  # SCRAM's PBKDF2: milliseconds
                await stream.send_all(TOKEN.pack(len(token)) + token)
                status, size = ANSWER.unpack(await _receive_exactly(stream, ANSWER.size))
                if not 0 <= size <= MAX_TOKEN:
                    raise ValueError(f"an answer of {size} bytes")
                answer = await _receive_exactly(stream, size)
                if status == REFUSED:
                    raise AuthenticationRefused(f"{where} refused SASL {sasl.mechanism} login as "
                                                f"{sasl.username}: {answer.decode(errors='replace')}")
                if status == LOGGED_IN:
                    if sasl.mechanism != "PLAIN":
                        scram.process_server_final_message(answer)  # raises: the server did not know the password
                    return
            raise AuthenticationRefused(f"{where} did not end the SASL {sasl.mechanism} login")
    except AuthenticationRefused:
        raise
    except trio.TooSlowError:
        raise AuthenticationRefused(f"no SASL login with {where} within 10 s") from None
    except (ValueError, KeyError) as exc:  # ScramClient's: a malformed or wrong server message
        raise AuthenticationRefused(f"SASL login with {where} failed: {exc}") from None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:  # the other end closed
        raise AuthenticationRefused(f"SASL login with {where} failed: {exc}") from exc


def _scram_final(scram: ScramClient) -> Callable[[bytes], bytes]:
    def final(server_first: bytes) -> bytes:
        scram.process_server_first_message(server_first)
        return scram.final_message()
    return final
