"""TLS listeners (SSL, SASL_SSL, mTLS) against Gregor and a real Apache Kafka 3.9.0 configured alike
with Kafka's ssl.* settings and PEM files made by `openssl` (issue 20): four clients produce and
consume with the broker's certificate verified against the CA and the host name, SASL over TLS,
client certificates required, an encrypted keystore key, and bad input (plaintext on a TLS port,
TLS on the plaintext port, a handshake cut short) closing only that connection."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import KafkaTimeoutError
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from tests.kit.wire import WireClient
from tests.kit.gregor import BrokerProcess
from tests.kit.both import GREGOR, KAFKA, started
from tests.security.brokers import PASSWORD, USER, USERS
from tests.security.sasl_wire import NONE, SASL_AUTHENTICATION_FAILED, authenticate
from tests.security.round_trips import VALUES, kafka_python_consume, kafka_python_produce
from tests.security.round_trips import confluent_round_trip as confluent_values
from tests.security.tls import (
    Certificates,
    TlsWireClient,
    broker_settings,
    client_context,
    client_hello,
    make_certificates,
    read_until_closed,
)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256")
TLS_LISTENERS = ("SSL", "SASL_SSL")
ALERT = 0x15  # a TLS record of type alert
ANSWERED, REFUSED_IN_HANDSHAKE, REFUSED_AFTER_HANDSHAKE = "answered", "refused in the handshake", \
    "refused after the handshake"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, tmp_path_factory, certs):
    """PLAINTEXT, SSL and SASL_SSL listeners; the keystore's key in clear; no client certificates."""
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                "sasl.enabled.mechanisms": ",".join(MECHANISMS), **broker_settings(certs)}
    with started(request.param, tmp_path_factory.mktemp(request.param), settings, USERS) as b:
        yield b


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def mtls_broker(request, tmp_path_factory, certs):
    """PLAINTEXT and SSL listeners, ssl.client.auth=required, the keystore's key encrypted (ssl.key.password)."""
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                **broker_settings(certs, encrypted_key=True, client_auth="required")}
    with started(request.param, tmp_path_factory.mktemp(f"mtls-{request.param}"), settings) as b:
        yield b


def _create_topic(broker, name: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=broker.listeners["PLAINTEXT"])
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()
    return name


@pytest.fixture
def topic(broker, topic_name) -> str:
    return _create_topic(broker, topic_name)


@pytest.fixture
def mtls_topic(mtls_broker, topic_name) -> str:
    return _create_topic(mtls_broker, topic_name)


@dataclass(frozen=True)
class Security:
    """How a client connects: its security.protocol, SASL mechanism, and whether it shows its certificate."""

    protocol: str = "SSL"
    mechanism: str | None = None
    certificate: bool = False


SSL_ONLY, MTLS = Security(), Security(certificate=True)


def kafka_python_config(certs: Certificates, security: Security) -> dict:
    config = {"security_protocol": security.protocol, "ssl_cafile": str(certs.ca), "ssl_check_hostname": True}
    if security.certificate:
        config |= {"ssl_certfile": str(certs.client_cert), "ssl_keyfile": str(certs.client_key)}
    if security.mechanism:
        config |= {"sasl_mechanism": security.mechanism, "sasl_plain_username": USER,
                   "sasl_plain_password": PASSWORD}
    return config


def librdkafka_config(certs: Certificates, security: Security) -> dict[str, str]:
    """confluent-kafka's and kcat's settings (both are librdkafka)."""
    config = {"security.protocol": security.protocol, "ssl.ca.location": str(certs.ca),
              "ssl.endpoint.identification.algorithm": "https"}
    if security.certificate:
        config |= {"ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)}
    if security.mechanism:
        config |= {"sasl.mechanism": security.mechanism, "sasl.username": USER, "sasl.password": PASSWORD}
    return config


def java_props(certs: Certificates, security: Security) -> list[str]:
    props = {"security.protocol": security.protocol, "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(certs.ca), "ssl.endpoint.identification.algorithm": "https"}
    if security.certificate:
        props |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.client_keystore)}
    if security.mechanism:
        module = "plain.PlainLoginModule" if security.mechanism == "PLAIN" else "scram.ScramLoginModule"
        props |= {"sasl.mechanism": security.mechanism, "sasl.jaas.config":
                  f'org.apache.kafka.common.security.{module} required username="{USER}" password="{PASSWORD}";'}
    return [arg for key, value in props.items() for arg in ("--prop", f"{key}={value}")]


def kafka_python_round_trip(address: str, topic: str, certs: Certificates, security: Security) -> list[bytes]:
    config = kafka_python_config(certs, security)
    kafka_python_produce(address, topic, **config)
    return kafka_python_consume(address, topic, **config)


def confluent_round_trip(address: str, topic: str, certs: Certificates, security: Security) -> list[bytes]:
    return confluent_values({"bootstrap.servers": address, "log_level": 0, **librdkafka_config(certs, security)}, topic)


def java_round_trip(address: str, topic: str, certs: Certificates, security: Security) -> list[bytes]:
    from compat_tests.clients.java import require_java, run_java
    require_java()
    common = ["--bootstrap", address, "--topic", topic, "--timeout-ms", "20000", *java_props(certs, security)]
    acks = run_java(["produce", *common, "--count", str(len(VALUES))])  # values value-0, value-1, ...
    assert [a["offset"] for a in acks] == list(range(len(VALUES)))
    records = run_java(["consume-assign", *common, "--from", "earliest", "--max", str(len(VALUES))])
    return [r["value"].encode() for r in records]


def kcat_round_trip(address: str, topic: str, certs: Certificates, security: Security) -> list[bytes]:
    from compat_tests.clients.kcat import require_kcat, run_kcat
    require_kcat()
    settings = [arg for key, value in librdkafka_config(certs, security).items() for arg in ("-X", f"{key}={value}")]
    common = ["-b", address, "-t", topic, *settings]
    run_kcat(["-P", *common], input="".join(f"{v.decode()}\n" for v in VALUES))
    out = run_kcat(["-C", *common, "-p", "0", "-o", "beginning", "-c", str(len(VALUES))]).stdout
    return [line.encode() for line in out.splitlines()]


ROUND_TRIPS = {"kafka-python": kafka_python_round_trip, "confluent-kafka": confluent_round_trip,
               "java": java_round_trip, "kcat": kcat_round_trip}


def _api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest[3](client_software_name="gregor-tests", client_software_version="1")


def tls_outcome(address: str, context: ssl.SSLContext, server_hostname: str = "127.0.0.1") -> str:
    """What becomes of an ApiVersions request over TLS: ANSWERED, or refused in or after the handshake
    (under TLS 1.3 a client's side of the handshake completes before the broker has seen its
    certificate, so a refusal of the certificate arrives at the first read)."""
    try:
        client = TlsWireClient(address, context, server_hostname)
    except (ssl.SSLError, ConnectionError):
        return REFUSED_IN_HANDSHAKE
    try:
        client.send(_api_versions())
        frame = client.receive_frame()
    except (ssl.SSLError, ConnectionError):
        return REFUSED_AFTER_HANDSHAKE
    finally:
        client.close()
    return REFUSED_AFTER_HANDSHAKE if frame is None else ANSWERED


def plaintext_answered(address: str) -> bool:
    client = WireClient(address)
    try:
        return client.request(_api_versions()).error_code == NONE
    finally:
        client.close()


def every_listener_serves(broker, certs: Certificates) -> dict[str, bool]:
    """Each listener answers ApiVersions (allowed before SASL authentication) to a well-behaved client."""
    served = {}
    for name, address in broker.listeners.items():
        if name == "PLAINTEXT":
            served[name] = plaintext_answered(address)
        else:
            served[name] = tls_outcome(address, client_context(certs, certificate=_own(certs))) == ANSWERED
    return served


def _own(certs: Certificates) -> tuple:
    return certs.client_cert, certs.client_key


def assert_no_traceback(broker) -> None:
    """Gregor logs bad input without a traceback. Kafka's log is not checked: it logs a TLS ClientHello
    on its PLAINTEXT port as a WARN with InvalidReceiveException, and failed handshakes at INFO
    ("Failed authentication with /127.0.0.1 (SSL handshake failed)")."""
    if isinstance(broker, BrokerProcess):
        assert "Traceback" not in broker.log(), broker.log()[-4000:]


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


# a. Four clients over SSL, the broker's certificate verified against the CA and 127.0.0.1 (its SAN).

@pytest.mark.clients
@pytest.mark.parametrize("client", ROUND_TRIPS)
def test_clients_produce_and_consume_over_ssl(broker, topic, certs, client):
    assert ROUND_TRIPS[client](broker.listeners["SSL"], topic, certs, SSL_ONLY) == VALUES


@pytest.mark.parametrize("listener", TLS_LISTENERS)
@pytest.mark.parametrize("server_hostname", ["127.0.0.1", "localhost"])
def test_the_broker_certificate_verifies_against_the_ca_for_both_its_names(broker, certs, listener,
                                                                           server_hostname):
    address = broker.listeners[listener]
    assert tls_outcome(address, client_context(certs), server_hostname) == ANSWERED


def test_a_client_trusting_another_ca_or_expecting_another_host_refuses_the_broker(broker, certs):
    address = broker.listeners["SSL"]
    with pytest.raises(ssl.SSLCertVerificationError):
        TlsWireClient(address, client_context(certs, ca=certs.stranger_ca))
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        TlsWireClient(address, client_context(certs), server_hostname="gregor.invalid")
    assert all(every_listener_serves(broker, certs).values())
    assert_no_traceback(broker)


def test_metadata_advertises_the_ssl_listener_to_a_client_that_came_in_on_it(broker, certs):
    client = TlsWireClient(broker.listeners["SSL"], client_context(certs))
    try:
        brokers = client.request(MetadataRequest[1](topics=None)).brokers
    finally:
        client.close()
    assert [f"{b.host}:{b.port}" for b in brokers] == [broker.listeners["SSL"]]


# b. SASL over TLS.

@pytest.mark.clients
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", ROUND_TRIPS)
def test_clients_produce_and_consume_over_sasl_ssl(broker, topic, certs, client, mechanism):
    security = Security("SASL_SSL", mechanism)
    assert ROUND_TRIPS[client](broker.listeners["SASL_SSL"], topic, certs, security) == VALUES


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_over_sasl_ssl_gets_sasl_authentication_failed_and_the_connection_closed(
        broker, certs, mechanism):
    client = TlsWireClient(broker.listeners["SASL_SSL"], client_context(certs))
    try:
        refused = authenticate(client, mechanism, USER, "wrong")[-1]
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
        assert client.closed_by_peer()
    finally:
        client.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_an_authenticated_sasl_ssl_connection_is_served(broker, certs, mechanism):
    client = TlsWireClient(broker.listeners["SASL_SSL"], client_context(certs))
    try:
        assert authenticate(client, mechanism, USER, PASSWORD)[-1].error_code == NONE
        brokers = client.request(MetadataRequest[1](topics=None)).brokers
        assert [f"{b.host}:{b.port}" for b in brokers] == [broker.listeners["SASL_SSL"]]
    finally:
        client.close()


# c. mTLS: ssl.client.auth=required.

@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"])
@pytest.mark.parametrize("certificate", ["none", "signed by another CA"])
def test_mtls_refuses_a_client_without_a_trusted_certificate_at_the_tls_level(mtls_broker, certs, certificate,
                                                                               version):
    # Kafka sends a bad_certificate alert: in the handshake under TLS 1.2; under TLS 1.3 at the first
    # read, the client's side of the handshake having completed with its (empty) certificate.
    shown = None if certificate == "none" else (certs.stranger_client_cert, certs.stranger_client_key)
    context = client_context(certs, certificate=shown)
    context.minimum_version = context.maximum_version = version
    expected = REFUSED_IN_HANDSHAKE if version == ssl.TLSVersion.TLSv1_2 else REFUSED_AFTER_HANDSHAKE
    assert tls_outcome(mtls_broker.listeners["SSL"], context) == expected
    assert all(every_listener_serves(mtls_broker, certs).values())
    assert_no_traceback(mtls_broker)


@pytest.mark.clients
def test_mtls_kafka_python_without_a_certificate_never_gets_past_bootstrap(mtls_broker, certs):
    with pytest.raises(KafkaTimeoutError):
        KafkaConsumer(bootstrap_servers=mtls_broker.listeners["SSL"], bootstrap_timeout_ms=3000,
                      **kafka_python_config(certs, SSL_ONLY))


@pytest.mark.clients
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "java"])
def test_mtls_clients_with_a_certificate_produce_and_consume(mtls_broker, mtls_topic, certs, client):
    assert ROUND_TRIPS[client](mtls_broker.listeners["SSL"], mtls_topic, certs, MTLS) == VALUES


# e. An encrypted keystore key.

def test_a_keystore_with_an_encrypted_key_serves_its_certificate_with_ssl_key_password(mtls_broker, certs):
    assert certs.server_keystore_encrypted.read_text().startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    client = TlsWireClient(mtls_broker.listeners["SSL"], client_context(certs, certificate=_own(certs)),
                           server_hostname="localhost")
    try:
        subject = dict(pair for rdn in client.sock.getpeercert()["subject"] for pair in rdn)
        assert client.request(_api_versions()).error_code == NONE
    finally:
        client.close()
    assert subject["commonName"] == "localhost"


# d. The wrong protocol on a port.

@pytest.mark.parametrize("listener", TLS_LISTENERS)
def test_a_plaintext_request_on_a_tls_port_is_closed_unanswered(broker, certs, listener):
    client = WireClient(broker.listeners[listener])
    try:
        client.send(_api_versions())
        closed, received = read_until_closed(client.sock, 10)
    finally:
        client.close()
    assert closed
    # Kafka sends a TLS alert record (internal_error) and closes; closing without one is as good.
    assert received == b"" or received[0] == ALERT
    assert every_listener_serves(broker, certs) == dict.fromkeys(broker.listeners, True)
    assert_no_traceback(broker)


def test_a_tls_client_on_the_plaintext_port_fails_its_handshake_cleanly(broker, certs):
    # Kafka reads the ClientHello's first bytes as a 369 MB request size, over socket.request.max.bytes,
    # and closes: the client's handshake ends in an EOF.
    assert tls_outcome(broker.listeners["PLAINTEXT"], client_context(certs)) == REFUSED_IN_HANDSHAKE
    assert every_listener_serves(broker, certs) == dict.fromkeys(broker.listeners, True)
    assert_no_traceback(broker)


# f. A handshake cut short.

@pytest.mark.parametrize("listener", TLS_LISTENERS)
@pytest.mark.parametrize("cut", [3, 40])
def test_a_client_hello_cut_short_then_closed_leaves_the_broker_serving(broker, certs, listener, cut):
    with socket.create_connection(_host_port(broker.listeners[listener])) as sock:
        sock.sendall(client_hello()[:cut])
    assert every_listener_serves(broker, certs) == dict.fromkeys(broker.listeners, True)
    assert_no_traceback(broker)


def test_a_stalled_handshake_does_not_hold_up_other_clients(broker, certs):
    stalled = socket.create_connection(_host_port(broker.listeners["SSL"]))
    try:
        stalled.sendall(client_hello()[:40])
        assert every_listener_serves(broker, certs) == dict.fromkeys(broker.listeners, True)
    finally:
        stalled.close()
    assert every_listener_serves(broker, certs) == dict.fromkeys(broker.listeners, True)
    assert_no_traceback(broker)
