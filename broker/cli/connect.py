"""How the `gregor` client commands reach a broker, and how Kafka errors read on their one line.

Every command speaks only the Kafka protocol through kafka-python, so it works against Apache
Kafka as well as Gregor. Before a client is made, each bootstrap address is probed with a plain
TCP connect: a refused or silent address then fails in seconds, where kafka-python would retry
for its 30 s bootstrap timeout. kafka-python's own log lines are silenced; what went wrong is
raised as CliError and printed once by broker/cli/main.py. A --command-config file (Java properties,
as Kafka's tools take it) becomes kafka-python's TLS and SASL settings.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from broker.cli.format import UsageError, parse_bootstrap, parse_properties
from broker.cli.login import LoginRefused, check_login
from broker.security.sasl import jaas_login

PROBE_TIMEOUT_S = 3.0
CLIENT_ID = "gregor-cli"
# after the probe, how long a client may take to bootstrap (ApiVersions, Metadata) and to answer
BOOTSTRAP_TIMEOUT_MS = 10_000
REQUEST_TIMEOUT_MS = 15_000
# The Kafka client properties a --command-config file may set, as kafka-python names them; kafka-python
# reads PEM files only, so the trust and key stores must be PEM (ssl.*.type=PEM)
CLIENT_PROPERTIES = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
                     "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
                     "ssl.truststore.location": "ssl_cafile", "ssl.keystore.location": "ssl_certfile",
                     "ssl.key.password": "ssl_password"}
OTHER_PROPERTIES = ("sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type",
                    "ssl.endpoint.identification.algorithm")


class CliError(Exception):
    """A command failed: printed as `gregor: <message>` on stderr, exit status `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def quiet_kafka_logs() -> None:
    """kafka-python logs every retry and closed connection; the command reports the outcome once."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL + 1)


def probe(bootstrap: str) -> tuple[str, int]:
    """Fail fast when nothing listens at any bootstrap address; the first that answers."""
    reasons = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
            return host, port
        except OSError as exc:
            reasons.append(exc.strerror or str(exc) or type(exc).__name__)
    raise CliError(f"no broker answers at {bootstrap}: {'; '.join(reasons)}")


def error_text(error: BaseException | type, detail: str | None = None) -> str:
    """A Kafka error as `NAME: detail`, e.g. `TOPIC_ALREADY_EXISTS: Topic 'x' already exists.`:
    Kafka's protocol name for the code, then the broker's message or the code's description."""
    cls = error if isinstance(error, type) else type(error)
    if detail is None and not isinstance(error, type) and error.args:
        detail = str(error.args[0])
    name = getattr(cls, "message", None) or cls.__name__
    if not getattr(cls, "errno", None):  # a client-side error: its own text says it all
        return detail or name
    return f"{name}: {detail or cls.description}"


def response_error(code: int, message: str | None = None) -> str | None:
    """The text of a per-item error code in a response (None for success)."""
    if not code:
        return None
    return error_text(Errors.for_code(code), message or None)


def _common(bootstrap: str, security: dict | None = None) -> dict:
    address = probe(bootstrap)
    if security:
        try:
            check_login(*address, security)
        except LoginRefused as exc:
            raise CliError(str(exc)) from None
    quiet_kafka_logs()
    return {"bootstrap_servers": bootstrap, "client_id": CLIENT_ID, "bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS,
            "request_timeout_ms": REQUEST_TIMEOUT_MS, "reconnect_backoff_max_ms": 1000}


@contextmanager
def kafka_errors(action: str) -> Iterator[None]:
    """Turn a kafka-python exception into one CliError line naming what was being done."""
    try:
        yield
    except Errors.IncompatibleBrokerVersion as exc:
        api = re.search(r"'(\w+?)Request'", str(exc))
        raise CliError(f"cannot {action}: the broker does not support "
                       f"{api.group(1) if api else 'the request'} (UNSUPPORTED_VERSION)") from None
    except Errors.KafkaTimeoutError as exc:
        raise CliError(f"cannot {action}: the broker did not answer in time ({exc})") from None
    except Errors.KafkaError as exc:
        raise CliError(f"cannot {action}: {error_text(exc)}") from None


def command_config(path: str) -> dict:
    """kafka-python's client settings from a Kafka --command-config file (a bad file: status 2)."""
    try:
        properties = parse_properties(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"cannot read --command-config {path}: {exc.strerror}", status=2) from None
    except UsageError as exc:
        raise CliError(f"--command-config {path}: {exc}", status=2) from None
    unknown = sorted(set(properties) - set(CLIENT_PROPERTIES) - set(OTHER_PROPERTIES))
    if unknown:
        raise CliError(f"--command-config {path}: unknown {', '.join(unknown)} (known: "
                       f"{', '.join(sorted((*CLIENT_PROPERTIES, *OTHER_PROPERTIES)))})", status=2)
    for store in ("ssl.truststore.type", "ssl.keystore.type"):
        if properties.get(store, "PEM").upper() != "PEM":
            raise CliError(f"--command-config {path}: {store}={properties[store]}: only PEM files can be read",
                           status=2)
    configs = {CLIENT_PROPERTIES[k]: v for k, v in properties.items() if k in CLIENT_PROPERTIES}
    if "sasl.jaas.config" in properties:  # `... required username="alice" password="...";`
        login = jaas_login(properties["sasl.jaas.config"])
        options = login[1] if login else {}
        if "username" not in options or "password" not in options:
            raise CliError(f'--command-config {path}: sasl.jaas.config needs username="..." and password="..."',
                           status=2)
        configs.update(sasl_plain_username=options["username"], sasl_plain_password=options["password"])
    protocol = configs.get("security_protocol", "PLAINTEXT")
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise CliError(f"--command-config {path}: unknown security.protocol {protocol}", status=2)
    sasl = {"sasl_mechanism", "sasl_plain_username", "sasl_plain_password"}
    if protocol.startswith("SASL_") and not sasl <= set(configs):
        raise CliError(f"--command-config {path}: {protocol} needs sasl.mechanism and sasl.jaas.config (or "
                       "sasl.username and sasl.password)", status=2)
    for key in ("ssl.truststore.location", "ssl.keystore.location"):
        if key in properties and not Path(properties[key]).is_file():
            raise CliError(f"--command-config {path}: {key}: no file {properties[key]}", status=2)
    if "ssl_certfile" in configs:  # Kafka's PEM key store holds the key and the certificate chain
        configs["ssl_keyfile"] = configs["ssl_certfile"]
    if "ssl.endpoint.identification.algorithm" in properties:  # empty turns the host name check off
        configs["ssl_check_hostname"] = bool(properties["ssl.endpoint.identification.algorithm"])
    return configs


def security(args) -> dict:
    """kafka-python's TLS and SASL settings from the command's --command-config, if it has one."""
    return command_config(args.command_config) if args.command_config else {}


@contextmanager
def admin_client(bootstrap: str, config_file: str | None = None) -> Iterator[KafkaAdminClient]:
    """An admin client of `bootstrap`, with the TLS and SASL settings of a --command-config file."""
    security = command_config(config_file) if config_file else {}
    with kafka_errors(f"connect to {bootstrap}"):
        admin = KafkaAdminClient(**_common(bootstrap, security), **security)
    try:
        yield admin
    finally:
        admin.close()


def consumer_client(bootstrap: str, **configs) -> KafkaConsumer:
    with kafka_errors(f"connect to {bootstrap}"):
        return KafkaConsumer(**_common(bootstrap, configs), allow_auto_create_topics=False, **configs)


def producer_client(bootstrap: str, **configs) -> KafkaProducer:
    with kafka_errors(f"connect to {bootstrap}"):  # max_block_ms: how long send() may wait for metadata
        return KafkaProducer(**_common(bootstrap, configs), max_block_ms=BOOTSTRAP_TIMEOUT_MS, **configs)


def topic_partitions(admin: KafkaAdminClient, topic: str) -> list[int]:
    """The partitions of `topic`, from Metadata; an unknown topic is a CliError."""
    with kafka_errors(f"describe topic {topic}"):
        (found,) = admin.describe_topics([topic])
    if found.get("error_code"):
        raise CliError(f"unknown topic {topic}" if found["error_code"] == Errors.UnknownTopicOrPartitionError.errno
                       else f"cannot describe topic {topic}: {response_error(found['error_code'])}")
    return sorted(p["partition_index"] for p in found["partitions"])
