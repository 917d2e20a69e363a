"""Listeners with Kafka's syntax (`listeners`, `advertised.listeners`), and the per-connection
SASL session a SASL listener's connections go through before any other request.

Owns parsing the settings into Listener values, the TLS context of SSL and SASL_SSL listeners
(Kafka's ssl.* settings, PEM files), and the session's state machine (KIP-43 and
KIP-152: SaslHandshake, then SaslAuthenticate, or raw tokens after a v0 handshake; KIP-368
re-authentication). The SASL mechanisms themselves are broker/security/sasl.py's; the requests are
answered by broker/handlers/sasl.py. Never does I/O.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # broker/security/sasl.py serves these
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")

SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY, API_VERSIONS_KEY = 17, 36, 18


class ListenerError(ValueError):
    """A `listeners` or `advertised.listeners` value Gregor cannot serve; the message says why."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # also its security protocol (Kafka's default listener.security.protocol.map)
    host: str  # "" binds every interface
    port: int  # 0: any free port
    advertised_host: str = ""
    advertised_port: int = 0

    @property
    def sasl(self) -> bool:
        return self.name.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.name in TLS_PROTOCOLS

    def with_port(self, port: int) -> Listener:
        return Listener(self.name, self.host, port, self.advertised_host, self.advertised_port)

    def url(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse(text: str, setting: str = "listeners") -> list[Listener]:
    """`NAME://HOST:PORT[,NAME://HOST:PORT...]`; NAME is a security protocol. TLS listeners are
    refused (not built yet), as are two listeners of one name."""
    out: list[Listener] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ListenerError(f"{setting}: expected NAME://HOST:PORT, got {item!r}")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if name not in SECURITY_PROTOCOLS:
            raise ListenerError(f"{setting}: listener name {name} is not a security protocol "
                                f"({', '.join(SECURITY_PROTOCOLS)}); Gregor has no listener.security.protocol.map")
        if any(listener.name == name for listener in out):
            raise ListenerError(f"{setting}: listener {name} is given twice")
        if not 0 <= port <= 65535:
            raise ListenerError(f"{setting}: port {port} of {name} is not 0-65535")
        out.append(Listener(name, host, port))
    if not out and setting == "listeners":
        raise ListenerError("listeners: no listener given")
    return out


def with_advertised(listeners: list[Listener], advertised: str) -> list[Listener]:
    """Each listener with the address clients are told (advertised.listeners, by name)."""
    told = {a.name: a for a in parse(advertised, "advertised.listeners")} if advertised.strip() else {}
    unknown = set(told) - {listener.name for listener in listeners}
    if unknown:
        raise ListenerError(f"advertised.listeners: {', '.join(sorted(unknown))} is not in listeners")
    return [Listener(listener.name, listener.host, listener.port, told[listener.name].host, told[listener.name].port)
            if listener.name in told else listener for listener in listeners]


def tls_context(values: Mapping[str, Any], sasl: bool = False, client_auth: str | None = None) -> ssl.SSLContext:
    """The server TLS context of SSL and SASL_SSL listeners, from Kafka's settings: a PEM
    keystore (one file: the private key and its certificate chain, as Kafka's PEM keystore file;
    `ssl.key.password` when the key is encrypted), a PEM truststore of CA certificates for client
    certificates, and ssl.client.auth, which a SASL_SSL listener (`sasl`) ignores as Kafka does
    (Kafka applies only listener.name.sasl_ssl.ssl.client.auth there: SASL authenticates);
    `client_auth` instead of ssl.client.auth (the replication port's, broker/cluster/tls.py).
    Raises ListenerError with one line when it cannot be built."""
    if values["ssl.keystore.type"].upper() != "PEM" or values["ssl.truststore.type"].upper() != "PEM":
        raise ListenerError("ssl.keystore.type and ssl.truststore.type: Gregor reads PEM files only "
                            "(convert a JKS or PKCS12 store with keytool/openssl)")
    keystore = values["ssl.keystore.location"]
    if not keystore:
        raise ListenerError("an SSL or SASL_SSL listener needs ssl.keystore.location (a PEM file with the "
                            "private key and the certificate chain)")
    auth = (client_auth or values["ssl.client.auth"]).lower()
    if auth not in ("none", "requested", "required"):
        raise ListenerError(f"ssl.client.auth must be none, requested or required, not {auth!r}")
    if sasl:
        auth = "none"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Kafka's ssl.enabled.protocols: TLSv1.2,TLSv1.3
    try:
        context.load_cert_chain(keystore, password=values["ssl.key.password"] or None)
    except (OSError, ssl.SSLError) as exc:
        raise ListenerError(f"ssl.keystore.location {keystore}: cannot load its key and certificate chain "
                            f"({exc.__class__.__name__}: {getattr(exc, 'strerror', None) or exc})") from None
    truststore = values["ssl.truststore.location"]
    if truststore:
        try:
            context.load_verify_locations(truststore)
        except (OSError, ssl.SSLError) as exc:
            raise ListenerError(f"ssl.truststore.location {truststore}: cannot load its certificates ({exc})") from None
    elif auth != "none":
        raise ListenerError(f"ssl.client.auth={auth} needs ssl.truststore.location (the CA certificates "
                            "client certificates are checked against)")
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[auth]
    return context


_RDN_NAMES = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
              "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
              "domainComponent": "DC", "userId": "UID"}  # the keywords Java's RFC 2253 form uses


def certificate_refused(cause: BaseException) -> bool:
    """A peer certificate that failed verification, or none where one is required: a failed
    authentication (failed.authentication.limit), unlike a plaintext client or a cut handshake."""
    return (isinstance(cause, ssl.SSLCertVerificationError)
            or getattr(cause, "reason", None) == "PEER_DID_NOT_RETURN_A_CERTIFICATE")


def ssl_principal(cert: dict | None) -> str:
    """Kafka's DEFAULT ssl.principal.mapping.rules: the client certificate's subject as Java's
    X500Principal.getName() writes it (RFC 2253: most specific first, "CN=alice,OU=eng,O=acme"),
    or ANONYMOUS without a certificate. `cert` is ssl's getpeercert() dict."""
    subject = (cert or {}).get("subject", ())
    if not subject:
        return "ANONYMOUS"

    def escape(value: str) -> str:
        out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
        return "\\" + out if out[:1] in ("#", " ") else out

    return ",".join("+".join(f"{_RDN_NAMES.get(k, k)}={escape(v)}" for k, v in rdn) for rdn in reversed(subject))


@dataclass(slots=True)
class SaslSession:
    """Where one connection of a SASL listener stands. States: `handshake` (only ApiVersions
    and SaslHandshake), `authenticate` (SaslAuthenticate, or raw tokens after a v0
    handshake), `done` (every request; SaslHandshake starts a re-authentication)."""

    enabled: tuple[str, ...]
    lifetime_ms: int  # connections.max.reauth.ms (0: sessions do not expire)
    state: str = "handshake"
    mechanism: str = ""
    raw_tokens: bool = False  # SaslHandshake v0: the next frames are bare SASL tokens
    authenticator: object | None = None
    user: str | None = None  # the authenticated user (principal User:<user>)
    expires_ms: float | None = None  # monotonic ms after which only re-authentication is served
    reauthenticating: bool = False

    def refusal(self, api_key: int, now_ms: float) -> str | None:
        """Why this request may not be served now (the connection is then closed, as Kafka
        closes it), or None."""
        if self.state == "handshake":
            if api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY):
                return None
            return f"Unexpected Kafka request of type {api_key} during SASL handshake."
        if self.state == "authenticate":
            if api_key == SASL_AUTHENTICATE_KEY:
                return None
            return f"Unexpected Kafka request of type {api_key} during SASL authentication."
        if self.expires_ms is not None and now_ms >= self.expires_ms and api_key != SASL_HANDSHAKE_KEY:
            return "the SASL session expired (connections.max.reauth.ms) and was not re-authenticated"
        return None
