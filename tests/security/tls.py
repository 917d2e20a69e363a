"""Certificates for the TLS tests, made with the `openssl` command line, and TLS on the wire.

`make_certificates(dir)` writes a CA, a server certificate for 127.0.0.1 and localhost (its
subjectAltName, so clients verify the host), a client certificate, and the server's keystore as
Kafka's PEM keystore file: the PKCS#8 private key then the certificate chain, once with the key in
clear and once encrypted with KEY_PASSWORD (`ssl.key.password`). The truststore is the CA
certificate. `broker_settings` gives the ssl.* settings both brokers take alike.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.kit.wire import WireClient

KEY_PASSWORD = "keystore-key-secret"
SERVER_NAMES = "IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate: every truststore
    server_keystore: Path  # server key (PKCS#8, clear) + server certificate + CA certificate
    server_keystore_encrypted: Path  # the same with the key encrypted with KEY_PASSWORD
    client_cert: Path  # signed by the CA
    client_key: Path  # PKCS#8, clear
    client_keystore: Path  # client key + client certificate, for the Java client's PEM keystore
    stranger_ca: Path  # a CA that signed none of the above
    stranger_client_cert: Path  # a client certificate signed by the stranger CA
    stranger_client_key: Path


def _openssl(directory: Path, *args: str) -> None:
    done = subprocess.run(["openssl", *args], cwd=directory, check=False, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} exited {done.returncode}:\n{done.stderr}")


def _ca(directory: Path, name: str, subject: str) -> None:
    _openssl(directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.pem", "-days", "7", "-subj", subject,
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def _signed(directory: Path, name: str, subject: str, extensions: str, ca: str = "ca") -> None:
    """`name`.pem signed by `ca`.pem, its clear PKCS#8 key in `name`.key."""
    _openssl(directory, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.raw.key",
             "-out", f"{name}.csr", "-subj", subject)
    _openssl(directory, "pkcs8", "-topk8", "-nocrypt", "-in", f"{name}.raw.key", "-out", f"{name}.key")
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "7", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.pem")


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca", "/CN=Gregor test CA")
    _ca(directory, "stranger", "/CN=Stranger CA")
    _signed(directory, "server", "/O=Gregor tests/CN=localhost",
            f"basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName={SERVER_NAMES}\n")
    _signed(directory, "client", "/O=Gregor tests/CN=gregor-client",
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    _signed(directory, "stranger-client", "/O=Gregor tests/CN=stranger-client",
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n", ca="stranger")
    # PKCS#5 v1.5 / PKCS#12 PBE with 3DES: Kafka's PEM keystore (Java 17) cannot read OpenSSL 3's
    # default PBES2 ("PBES2 SecretKeyFactory not available"); Python's ssl reads both.
    _openssl(directory, "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", "server.key",
             "-passout", f"pass:{KEY_PASSWORD}", "-out", "server.encrypted.key")
    chain = (directory / "server.pem").read_text() + (directory / "ca.pem").read_text()
    (directory / "server.keystore.pem").write_text((directory / "server.key").read_text() + chain)
    (directory / "server.encrypted.keystore.pem").write_text(
        (directory / "server.encrypted.key").read_text() + chain)
    (directory / "client.keystore.pem").write_text(
        (directory / "client.key").read_text() + (directory / "client.pem").read_text())
    return Certificates(ca=directory / "ca.pem", server_keystore=directory / "server.keystore.pem",
                        server_keystore_encrypted=directory / "server.encrypted.keystore.pem",
                        client_cert=directory / "client.pem", client_key=directory / "client.key",
                        client_keystore=directory / "client.keystore.pem", stranger_ca=directory / "stranger.pem",
                        stranger_client_cert=directory / "stranger-client.pem",
                        stranger_client_key=directory / "stranger-client.key")


def node_keystore(directory: Path, name: str, subject: str, ca: str = "ca") -> Path:
    """A cluster node's PEM keystore (key, certificate, CA): one certificate for both ends of the
    replication port (security.inter.broker.protocol=SSL), so serverAuth and clientAuth, naming
    127.0.0.1 and localhost. `ca` ("ca" or "stranger", made by make_certificates) signs it."""
    _signed(directory, name, subject, "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n"
            f"subjectAltName={SERVER_NAMES}\n", ca=ca)
    keystore = directory / f"{name}.keystore.pem"
    keystore.write_text((directory / f"{name}.key").read_text() + (directory / f"{name}.pem").read_text()
                        + (directory / f"{ca}.pem").read_text())
    return keystore


def server_keystore(directory: Path, name: str, subject: str = "/O=Gregor tests/CN=localhost",
                    names: str = SERVER_NAMES) -> Path:
    """Another server keystore signed by the test CA (a renewed certificate: a new key and serial),
    by default with the subject and subjectAltNames of make_certificates' server certificate."""
    _signed(directory, name, subject, f"basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName={names}\n")
    keystore = directory / f"{name}.keystore.pem"
    keystore.write_text((directory / f"{name}.key").read_text() + (directory / f"{name}.pem").read_text()
                        + (directory / "ca.pem").read_text())
    return keystore


def served_serial(address: str, ca: Path) -> str:
    """The serial number of the certificate a TLS listener at `address` serves a new connection."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        return tls.getpeercert()["serialNumber"]


def broker_settings(certs: Certificates, *, encrypted_key: bool = False, client_auth: str = "none") -> dict[str, str]:
    """Kafka's ssl.* settings for a broker serving the server certificate and trusting the CA."""
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_keystore_encrypted if encrypted_key else certs.server_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": client_auth,
    }
    if encrypted_key:
        settings["ssl.key.password"] = KEY_PASSWORD
    return settings


def client_context(certs: Certificates, *, certificate: tuple[Path, Path] | None = None,
                   ca: Path | None = None) -> ssl.SSLContext:
    """A client's TLS context: verifies the broker against `ca` (the test CA) and its host name, and
    presents `certificate` (certificate, key) when given."""
    context = ssl.create_default_context(cafile=str(ca or certs.ca))
    if certificate is not None:
        context.load_cert_chain(str(certificate[0]), str(certificate[1]))
    return context


class TlsWireClient(WireClient):
    """tests/broker/wire.WireClient over TLS: the handshake is done before the constructor returns."""

    def __init__(self, address: str, context: ssl.SSLContext, server_hostname: str = "127.0.0.1",
                 timeout: float = 10.0, source: str | None = None) -> None:
        super().__init__(address, timeout, source)
        try:  # a close without close_notify raises SSLEOFError instead of reading as a clean end
            self.sock = context.wrap_socket(self.sock, server_hostname=server_hostname,
                                            suppress_ragged_eofs=False)
        except BaseException:
            self.sock.close()
            raise

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """Closed, with or without TLS's close_notify, or by a TLS alert."""
        try:
            return super().closed_by_peer(timeout)
        except ssl.SSLError:
            return True


def client_hello(server_hostname: str = "127.0.0.1") -> bytes:
    """The bytes of a TLS ClientHello, as a client's first flight, without any socket."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bool, bytes]:
    """What the peer sends until it closes: (closed within `timeout`, the bytes received)."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        return False, received
    return True, received
