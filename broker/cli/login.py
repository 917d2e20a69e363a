"""One SASL login over the Kafka protocol before a `gregor` command's client starts (Kafka's
SaslHandshake and SaslAuthenticate, as every Kafka client sends them): a wrong password ends the
command at once with the broker's own message. kafka-python retries a failed bootstrap login
until its timeout (10 logins in 10 s, then "did not answer in time"), which says nothing of
the password. PLAIN's token is RFC 4616's; SCRAM's messages are kafka-python's ScramClient."""

from __future__ import annotations

import socket
import ssl
import struct

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

LOGIN_TIMEOUT_S = 10.0


class LoginRefused(Exception):
    """The login failed: its one line for the operator (broker/cli/connect.py prints it)."""


def check_login(host: str, port: int, security: dict) -> None:
    """Log in once at host:port with `security` (kafka-python's settings from --command-config);
    raises LoginRefused with the broker's answer when the login is refused. Nothing to do without SASL."""
    protocol = security.get("security_protocol", "PLAINTEXT")
    if not protocol.startswith("SASL_"):
        return
    mechanism = security["sasl_mechanism"]
    user, password = security["sasl_plain_username"], security["sasl_plain_password"]
    try:
        sock = socket.create_connection((host, port), timeout=LOGIN_TIMEOUT_S)
    except OSError as exc:
        raise LoginRefused(f"no broker answers at {host}:{port}: {exc.strerror or exc}") from None
    try:
        if protocol == "SASL_SSL":
            sock = _tls(sock, host, security)
        wire = _Wire(sock)
        shake = wire.request(SaslHandshakeRequest[1](mechanism=mechanism))
        if shake.error_code:
            raise LoginRefused(f"cannot log in at {host}:{port}: the broker does not enable SASL mechanism {mechanism} "
                           f"(it offers {', '.join(shake.mechanisms) or 'none'})")
        if mechanism == "PLAIN":
            steps = [lambda _: b"\0" + user.encode() + b"\0" + password.encode()]
        else:
            scram = ScramClient(user.replace("=", "=3D").replace(",", "=2C"), password, mechanism)
            steps = [lambda _: scram.first_message(), _final(scram)]
        answer = b""
        for step in steps:
            reply = wire.request(SaslAuthenticateRequest[2](auth_bytes=step(answer)))
            if reply.error_code:
                raise LoginRefused(f"authentication failed at {host}:{port} as {user} ({mechanism}): "
                               f"{reply.error_message or 'SASL_AUTHENTICATION_FAILED'}")
            answer = reply.auth_bytes
    except (OSError, ssl.SSLError) as exc:
        raise LoginRefused(f"cannot log in at {host}:{port}: {exc}") from None
    finally:
        sock.close()


def _final(scram: ScramClient):
    def final(server_first: bytes) -> bytes:
        scram.process_server_first_message(server_first)
        return scram.final_message()
    return final


def _tls(sock: socket.socket, host: str, security: dict) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=security.get("ssl_cafile"))
    context.check_hostname = security.get("ssl_check_hostname", True)
    if security.get("ssl_certfile"):
        context.load_cert_chain(security["ssl_certfile"], security.get("ssl_keyfile"), security.get("ssl_password"))
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLError as exc:
        raise LoginRefused(f"TLS handshake with {host} failed: {exc.reason or exc}") from None


class _Wire:
    """Requests framed by hand on one blocking socket (kafka-python's classes encode and decode)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.correlation_id = sock, 0

    def request(self, request: ApiMessage):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="gregor-cli")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", self._read(4))
        return request.header.get_response_class().decode(self._read(size), version=request.API_VERSION, header=True)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)
