"""TLS between a cluster's nodes: the replication port (the commitlog's shipping, and other groups'
transaction markers) when security.inter.broker.protocol=SSL (docs/replication.md, Security).

Both ends present their certificate (ssl.keystore.location) and check the other's against
ssl.truststore.location: a connection without a certificate the cluster's CA signed is refused
in the handshake. The connecting node also checks that the certificate names the host it
connects to (ssl.endpoint.identification.algorithm=https, Kafka's default), as a Kafka broker
does of the broker it fetches from. With an authorizer, the accepting node also wants the
peer's principal (the certificate's subject, as on an SSL listener) allowed ClusterAction on the
cluster: `super.users` or an ACL, what Kafka asks of its inter-broker principal. Without TLS the
port stays plain TCP (PLAINTEXT, the default), and the bytes leave with sendfile; through TLS they
are encrypted in Python's ssl, as Kafka's SSL gives up zero-copy."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from broker.net.listeners import ListenerError, certificate_refused, ssl_principal, tls_context

log = logging.getLogger("gregor.replication")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
HANDSHAKE_TIMEOUT_S = 10.0
_logged: set[tuple[str, str]] = set()  # (peer, reason) refusals already logged at warning level


@dataclass(frozen=True)
class NodeTls:
    server: ssl.SSLContext  # the replication port's side: a node's certificate required
    client: ssl.SSLContext  # a follower's or a transaction coordinator's side
    mutual: bool = True  # SSL: both ends show a certificate; SASL_SSL: the accepting node only


def contexts(values: Mapping[str, Any]) -> NodeTls | None:
    """The contexts security.inter.broker.protocol asks for (None: PLAINTEXT or SASL_PLAINTEXT);
    raises ListenerError with one line when they cannot be built. SASL_SSL: the connecting node
    checks the other's certificate, and shows none (SASL says who it is), as a SASL_SSL client."""
    protocol = values["security.inter.broker.protocol"].strip().upper()
    if protocol not in PROTOCOLS:
        raise ListenerError(f"security.inter.broker.protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    if not values["ssl.truststore.location"]:
        raise ListenerError(f"security.inter.broker.protocol={protocol} needs ssl.truststore.location (the CA "
                            "certificates every node's certificate is checked against) and ssl.keystore.location")
    mutual = protocol == "SSL"
    server = tls_context(values, client_auth="required" if mutual else "none")
    client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    client.minimum_version = ssl.TLSVersion.TLSv1_2
    client.load_verify_locations(values["ssl.truststore.location"])  # loaded once already by tls_context
    if mutual:
        client.load_cert_chain(values["ssl.keystore.location"], password=values["ssl.key.password"] or None)
    algorithm = values["ssl.endpoint.identification.algorithm"].strip().lower()
    if algorithm not in ("https", ""):
        raise ListenerError(f"ssl.endpoint.identification.algorithm must be https or empty, not {algorithm!r}")
    client.check_hostname = algorithm == "https"
    return NodeTls(server, client, mutual)


def _refused(who: str, reason: str) -> None:
    """One warning line per peer and reason, not one at each reconnection (a follower retries every second)."""
    (log.debug if (who, reason) in _logged else log.warning)("refused a replication connection from %s: %s", who,
                                                              reason)
    _logged.add((who, reason))


async def accept(tls: NodeTls, stream: trio.SocketStream, allowed: Callable[[str, str], bool],
                 failed: Callable[[str], None]) -> trio.SSLStream | None:
    """The TLS side of a connection to the replication port; None (logged) when the handshake
    fails or `allowed(principal, host)` refuses the peer's principal. A refused certificate is
    also a failed authentication of its host: `failed(host)` (failed.authentication.limit)."""
    try:
        host = stream.socket.getpeername()[0]
    except OSError:  # gone already
        await trio.aclose_forcefully(stream)
        return None
    secure = trio.SSLStream(stream, tls.server, server_side=True)
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await secure.do_handshake()
    except trio.TooSlowError:
        reason = "no TLS handshake within 10 s"
    except (trio.BrokenResourceError, OSError) as exc:  # plaintext, no certificate, or one the truststore does not know
        reason = f"TLS handshake failed ({exc.__cause__ or exc})"
        if certificate_refused(exc.__cause__ or exc):
            failed(host)
    else:
        if not tls.mutual:  # SASL_SSL: the principal is the SASL login's (broker/cluster/sasl.py)
            return secure
        principal = f"User:{ssl_principal(secure.getpeercert())}"
        if allowed(principal, host):
            return secure
        reason = f"principal {principal} is not allowed ClusterAction on the cluster (super.users or an ACL)"
    _refused(host, reason)
    await trio.aclose_forcefully(stream)
    return None


async def connect(tls: NodeTls | None, host: str, port: int) -> trio.abc.Stream:
    """A connection to another node's replication port: plain TCP, or TLS with this node's
    certificate (handshake done; raises trio.BrokenResourceError when it fails)."""
    stream = await trio.open_tcp_stream(host, port)
    if tls is None:
        return stream
    secure = trio.SSLStream(stream, tls.client, server_hostname=host)
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await secure.do_handshake()
    except trio.TooSlowError:
        await trio.aclose_forcefully(stream)
        raise trio.BrokenResourceError(f"no TLS handshake with {host}:{port} within 10 s") from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return secure
