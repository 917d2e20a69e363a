"""How the `gregor` client commands reach a broker, and how Kafka errors read on their one line.

Every command speaks only the Kafka protocol through kafka-python, so it works against Apache
Kafka as well as Gregor. Before a client is made, each bootstrap address is probed with a plain
TCP connect: a refused or silent address then fails in seconds, where kafka-python would retry
for its 30 s bootstrap timeout. kafka-python's own log lines are silenced; what went wrong is
raised as CliError and printed once by broker/cli.py.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from broker.cli_format import parse_bootstrap

PROBE_TIMEOUT_S = 3.0
CLIENT_ID = "gregor-cli"
# after the probe, how long a client may take to bootstrap (ApiVersions, Metadata) and to answer
BOOTSTRAP_TIMEOUT_MS = 10_000
REQUEST_TIMEOUT_MS = 15_000


class CliError(Exception):
    """A command failed: printed as `gregor: <message>` on stderr, exit status `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def quiet_kafka_logs() -> None:
    """kafka-python logs every retry and closed connection; the command reports the outcome once."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL + 1)


def probe(bootstrap: str) -> None:
    """Fail fast when nothing listens at any bootstrap address."""
    reasons = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
            return
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


def _common(bootstrap: str) -> dict:
    probe(bootstrap)
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


@contextmanager
def admin_client(bootstrap: str) -> Iterator[KafkaAdminClient]:
    with kafka_errors(f"connect to {bootstrap}"):
        admin = KafkaAdminClient(**_common(bootstrap))
    try:
        yield admin
    finally:
        admin.close()


def consumer_client(bootstrap: str, **configs) -> KafkaConsumer:
    with kafka_errors(f"connect to {bootstrap}"):
        return KafkaConsumer(**_common(bootstrap), allow_auto_create_topics=False, **configs)


def producer_client(bootstrap: str, **configs) -> KafkaProducer:
    with kafka_errors(f"connect to {bootstrap}"):  # max_block_ms: how long send() may wait for metadata
        return KafkaProducer(**_common(bootstrap), max_block_ms=BOOTSTRAP_TIMEOUT_MS, **configs)


def topic_partitions(admin: KafkaAdminClient, topic: str) -> list[int]:
    """The partitions of `topic`, from Metadata; an unknown topic is a CliError."""
    with kafka_errors(f"describe topic {topic}"):
        (found,) = admin.describe_topics([topic])
    if found.get("error_code"):
        raise CliError(f"unknown topic {topic}" if found["error_code"] == Errors.UnknownTopicOrPartitionError.errno
                       else f"cannot describe topic {topic}: {response_error(found['error_code'])}")
    return sorted(p["partition_index"] for p in found["partitions"])
