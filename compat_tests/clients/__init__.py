"""One interface over five Kafka clients, so each compat scenario is written once.

A scenario asks a `KafkaClient` to produce `Message`s, consume `Record`s, look up
offsets, join groups (classic or share groups) and administer topics. Each adapter (kafka_python,
confluent, java for the 3.9 and the 4.4 Java client, kcat) translates that into its client's own API and translates the client's
errors into Kafka error names (`ClientError.code`). An adapter that cannot express
an operation raises `Unsupported`; the scenario turns that into a counted skip.
Adapters never judge the broker's answers: the scenarios do.
"""

from __future__ import annotations

import importlib
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Protocol

# The column order of the matrix.
CLIENT_NAMES = ("kafka-python", "confluent-kafka", "java", "java-4.4", "kcat")
# name -> (adapter module, its class)
_MODULES = {"kafka-python": ("kafka_python", "Client"), "confluent-kafka": ("confluent", "Client"),
            "java": ("java", "Client"), "java-4.4": ("java", "Client4"), "kcat": ("kcat", "Client")}

# Offset specs for `list_offset`, as ListOffsets timestamps.
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# isolation.level of consumers and ListOffsets.
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
# The replication factor `create_topic` asks for: the broker's default (CreateTopics v4+), so that a
# scenario's topic is replicated as the broker under test wants it, alone (1) or in a cluster (a
# Gregor group's size, which it requires; a Kafka's default.replication.factor).
DEFAULT_REPLICATION = -1


class Unsupported(Exception):
    """The client has no way to express the operation; the scenario skips with this reason."""


# kafka-python's error names where they differ from Kafka's (org.apache.kafka.common.protocol.Errors),
# and each client's own timeout, which the scenarios see as TIMEOUT.
_KAFKA_NAMES = {"MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE", "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
                "KafkaTimeoutError": "TIMEOUT", "_MSG_TIMED_OUT": "TIMEOUT", "_TIMED_OUT": "TIMEOUT"}


class ClientError(Exception):
    """A client reported a broker or client error; `code` is the Kafka error name (Errors.java)."""

    def __init__(self, code: str, detail: str) -> None:
        code = _KAFKA_NAMES.get(code, code)
        super().__init__(f"{code}: {detail[-1500:]}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Message:
    """What a scenario asks a client to produce."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class Record:
    """What a client consumed."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1


@dataclass(frozen=True)
class Delivery:
    partition: int
    offset: int


@dataclass
class GroupDescription:
    state: str
    members: dict[str, set[int]] = field(default_factory=dict)  # member id -> assigned partitions


class GroupMember(Protocol):
    """A running group member (thread or process) that consumes and commits until stopped."""

    def assignment(self) -> set[int] | None:
        """Partitions this member holds now, or None when the client cannot tell."""

    def records(self) -> list[Record]: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ShareDelivery:
    """A record as a share-group member was handed it."""

    value: bytes | None
    delivery_count: int
    offset: int


class ShareMember(Protocol):
    """A running member of a share group (thread or process). It polls until `count` deliveries
    (then `linger` more seconds of polling), its deadline, or stop(); what it acknowledges is given
    when it starts (`KafkaClient.share_member`)."""

    def deliveries(self) -> list[ShareDelivery]: ...

    def wait(self, timeout: float) -> None:
        """Until the member has ended by itself (count and linger, or its deadline)."""

    def stop(self) -> None:
        """Leave the group and end; raises the ClientError the member met, if any."""


class TransactionalProducer(Protocol):
    """A producer with a transactional.id whose transactions are initialized (InitProducerId answered).
    Errors surface as ClientError; after one the producer can still be aborted, abandoned or closed."""

    def begin(self) -> None: ...

    def send(self, topic: str, messages: list[Message]) -> None:
        """Send in the open transaction and wait for every acknowledgement."""

    def commit(self) -> None: ...

    def abort(self) -> None: ...

    def abandon(self) -> None:
        """Stop dead, the open transaction neither committed nor aborted, as a crashed producer does."""

    def close(self) -> None:
        """Release the client; quiet about errors (the producer may be fenced)."""


class KafkaClient(Protocol):
    name: str

    def produce(self, topic: str, messages: list[Message], *, codec: str = "none",
                idempotent: bool = True, max_request_bytes: int | None = None) -> list[Delivery] | None:
        """Send in order and wait for every acknowledgement; None when the client cannot report
        offsets. `max_request_bytes` raises the client's own size limit so the broker's is tested."""

    def consume(self, topic: str, partitions: list[int], start: int | str, *, count: int | None = None,
                reset: str | None = None, timeout: float = 20.0,
                isolation: str = READ_UNCOMMITTED) -> list[Record]:
        """Assign `partitions`, start at an offset, "earliest", "latest" or "time:MS", read `count`
        records, or (count None) up to the end offsets seen at the start."""

    def list_offset(self, topic: str, partition: int, timestamp: int, *,
                    isolation: str = READ_UNCOMMITTED) -> tuple[int, int]:
        """ListOffsets for a timestamp or LATEST / EARLIEST / MAX_TIMESTAMP: (offset, timestamp);
        (-1, -1) when no record matches."""

    def transactional_producer(self, transactional_id: str, *,
                               transaction_timeout_ms: int = 60000) -> TransactionalProducer: ...

    def transform(self, group: str, source: str, sink: str, count: int, *, commit: bool,
                  prefix: bytes = b"out-") -> list[Record]:
        """Consume-transform-produce once: read `count` records of `source` as the group's only member
        (read_committed), send prefix+value of each to the same partition of `sink` in one transaction
        with the consumed offsets and the consumer's group metadata, then commit or abort. Returns
        the records read."""

    def group_consume(self, group: str, topic: str, count: int) -> list[Record]:
        """Subscribe as the only member, read `count` records committing them, leave."""

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
        """Committed offsets; -1 where none."""

    def start_member(self, group: str, topic: str) -> GroupMember: ...

    def create_topic(self, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None: ...

    def topic_configs(self, topic: str) -> dict[str, str]: ...

    def create_partitions(self, topic: str, total: int) -> None: ...

    def partition_count(self, topic: str) -> int: ...

    def delete_topic(self, topic: str) -> None: ...

    def list_topics(self) -> set[str]: ...

    def list_groups(self) -> set[str]: ...

    def describe_group(self, group: str) -> GroupDescription: ...

    def share_member(self, group: str, topic: str, *, explicit: bool = False, reject: tuple[bytes, ...] = (),
                     release: tuple[bytes, ...] = (), release_always: tuple[bytes, ...] = (),
                     renew: tuple[bytes, ...] = (), hold: bool = False, count: int | None = None,
                     linger: float = 0.0, timeout: float = 60.0) -> ShareMember:
        """Start a share-group member of `group` on `topic`. Implicit acknowledgement (each record
        ACCEPTed by the next poll) unless `explicit`; then each record whose value is in `reject` is
        REJECTed, in `release` RELEASEd on its first delivery, in `release_always` RELEASEd every
        time, in `renew` RENEWed twice (a lock's duration apart) and then ACCEPTed, any other
        ACCEPTed, committed after each poll. `hold`: acquire the first records polled and never
        acknowledge them, polling no more (their locks run out) until the deadline or stop()."""


class PollingMember(threading.Thread):
    """An in-process group member: `poll_once` on its own thread until stop(), then `close`.
    Set up the consumer before calling this __init__: it starts the thread."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self._halt = threading.Event()
        self._assigned: set[int] | None = None
        self._records: list[Record] = []
        self.error: ClientError | None = None
        self.start()

    def poll_once(self) -> tuple[list[Record], set[int]]:
        """Records read and the partitions held after one poll (and commit)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                records, self._assigned = self.poll_once()
                self._records.extend(records)
        except ClientError as e:
            self.error = e
        finally:
            self.close()

    def assignment(self) -> set[int] | None:
        return self._assigned

    def records(self) -> list[Record]:
        return list(self._records)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        if self.error is not None:
            raise self.error


def stop_process(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM a client process this suite started, SIGKILL it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def make_client(name: str, bootstrap: str) -> KafkaClient:
    """The adapter for `name`; raises Unsupported (with the install hint) when that client is missing."""
    module_name, class_name = _MODULES[name]
    module = importlib.import_module(f"compat_tests.clients.{module_name}")
    client = getattr(module, class_name)
    getattr(client, "require", module.require)()
    return client(bootstrap)
