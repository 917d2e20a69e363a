"""A real Apache Kafka broker beside Gregor: single-node KRaft, loopback only, data in a temp dir.

Its jars come from Maven Central through tests/oracle/pom.xml, resolved by bin/setup-kafka into
.cache/kafka/<version>/ (the directory holds `.resolved` once the copy is complete). Used by the
pytest fixtures (compat_tests, conformance, security) and by bench/run.py; tests/kit/kafka_cluster.py
runs three of them as one KRaft quorum. Only the process started here is ever signalled, by its PID:
SIGTERM, then SIGKILL.

A `listeners` setting as Gregor takes it (`PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0`,
also SSL and SASL_SSL; port 0 = any free port) gets Kafka's listener, advertised-listener and
security-protocol-map settings, each listener named after its protocol; users given as (name,
password, mechanism) get SCRAM credentials at format time and PLAIN entries in every SASL
listener's JAAS config (SASL_PLAINTEXT and SASL_SSL alike), as Gregor's PLAIN accepts any user with
a SCRAM credential. The ssl.* settings (ssl.keystore.type=PEM, ssl.keystore.location,
ssl.key.password, ssl.truststore.*, ssl.client.auth) pass through unchanged: Kafka applies them
to its SSL listeners, and to SASL_SSL ones except ssl.client.auth, which Kafka takes for SASL_SSL
only as `listener.name.sasl_ssl.ssl.client.auth` (KIP-684).
"""

from __future__ import annotations

import atexit
import base64
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from compat_tests.clients import stop_process
from tests.kit.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = os.environ.get("GREGOR_KAFKA_VERSION", "3.9.0")
ARTIFACT = "org.apache.kafka:kafka_2.13"


def jvm_options(heap: str = "1g") -> list[str]:
    """What Apache Kafka's own bin/kafka-run-class.sh and kafka-server-start.sh give the JVM (their
    heap is 1g; a node of a cluster on one test machine gets less)."""
    return ["-server", f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true"]


JVM_OPTS = jvm_options()

# A single node cannot hold the internal topics at Kafka's default replication factor of 3.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
# Kafka 4's share groups keep their state in __share_group_state (KIP-932)
SINGLE_NODE_4 = {
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

LOG4J = """\
log4j.rootLogger={level}, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


_running: set[KafkaBroker] = set()


@atexit.register
def _stop_leftovers() -> None:
    """A test run or benchmark that ends abnormally still ends the brokers it started."""
    for broker in list(_running):
        broker.stop(timeout=10)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class KafkaUnavailable(RuntimeError):
    """Kafka's jars are not in .cache: the reason names the artifact and the setup log."""


def kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """The jars of Kafka `version`; a release other than bin/setup's (3.9.0) is resolved from Maven
    Central the first time a test needs it (bin/setup-kafka: idempotent, locked, never fails)."""
    libs = ROOT / ".cache" / "kafka" / version
    if not (libs / ".resolved").exists() and version != KAFKA_VERSION:
        subprocess.run(["bash", str(ROOT / "bin" / "setup-kafka")], env={**os.environ, "GREGOR_KAFKA_VERSION": version},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if not (libs / ".resolved").exists():
        log = ROOT / ".cache" / "kafka" / f"{version}.log"
        why = log.read_text(errors="replace")[-600:] if log.exists() else "bin/setup-kafka has not run"
        raise KafkaUnavailable(f"Apache Kafka {ARTIFACT}:{version} is not resolved into {libs} "
                               f"(bin/setup-kafka, from Maven Central): {why.strip()}")
    return libs


def cluster_id() -> str:
    """A KRaft cluster id: a random UUID in Kafka's URL-safe base64 without padding. Like Kafka's
    Uuid.randomUuid(), never one that starts with '-', which StorageTool would read as an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _bind(listeners: str) -> dict[str, str]:
    """`NAME://host:port,...` as {NAME: "host:port"}, a free port in place of each port 0 (KRaft's
    voters need fixed ports, so Kafka is given real ones)."""
    bound = {}
    for listener in listeners.split(","):
        name, address = listener.strip().split("://", 1)
        if name not in SECURITY_PROTOCOLS:  # names double as protocols, as Gregor takes them
            raise ValueError(f"listener {name}: the name must be one of {', '.join(SECURITY_PROTOCOLS)}")
        host, port = address.rsplit(":", 1)
        bound[name] = f"{host}:{port if int(port) else free_port()}"
    return bound


@dataclass(frozen=True)
class Quorum:
    """The KRaft quorum a node belongs to: the cluster id every node is formatted with, and each
    voter's node id and controller port (static `controller.quorum.voters`)."""

    cluster_id: str
    voters: dict[int, int]  # node id -> controller port on 127.0.0.1

    @property
    def voters_setting(self) -> str:
        return ",".join(f"{node}@127.0.0.1:{port}" for node, port in sorted(self.voters.items()))


class KafkaBroker:
    """One Kafka 3.9 process (broker and controller in one, as the reference recordings were made).
    Alone (no `quorum`) it is its own single-voter quorum with a fresh cluster id and controller
    port at each start; as a node of a KafkaCluster it takes node id, quorum and listeners given."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None,
                 version: str = KAFKA_VERSION, log_level: str = "WARN",
                 users: list[tuple[str, str, str]] | None = None, *, node_id: int = 1,
                 quorum: Quorum | None = None, heap: str = "1g") -> None:
        self.libs = kafka_libs(version)
        self.node_id = node_id
        self.quorum = quorum
        self.heap = heap
        self.version = version
        self.data_dir = data_dir
        self.settings = dict(settings or {})
        self.users = list(users or [])  # (name, password, SCRAM mechanism), added when formatting
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.listeners: dict[str, str] = {}  # listener name -> "host:port"
        self.log_path = data_dir / "server.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str, jvm: list[str] | None = None) -> list[str]:
        return ["java", *(jvm or []), f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
                "-cp", f"{self.libs}/*", main, *args]

    def _configure(self) -> Path:
        settings = dict(self.settings)
        self.listeners = _bind(settings.pop("listeners", "PLAINTEXT://127.0.0.1:0"))
        if "PLAINTEXT" not in self.listeners:
            raise ValueError("the oracle broker needs a PLAINTEXT listener: readiness and admin use it")
        self.port = int(self.listeners["PLAINTEXT"].rsplit(":", 1)[1])
        if self.quorum is None:
            controller = free_port()
            voters = Quorum("", {self.node_id: controller}).voters_setting
        else:
            controller, voters = self.quorum.voters[self.node_id], self.quorum.voters_setting
        advertised = ",".join(f"{name}://{address}" for name, address in self.listeners.items())
        config = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"{advertised},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": advertised,
            # Listener names are their security protocols, as in the settings Gregor takes.
            "listener.security.protocol.map": ",".join(f"{name}:{name}" for name in self.listeners)
                                              + ",CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            **(SINGLE_NODE if self.quorum is None else {}),
            **(SINGLE_NODE_4 if self.quorum is None and not self.version.startswith("3.") else {}),
            **self._sasl_config(settings),
            **settings,
        }
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        return path

    def _sasl_config(self, settings: dict[str, str]) -> dict[str, str]:
        """Each SASL listener's JAAS config per enabled mechanism: PLAIN users listed inline, SCRAM
        users read from the credentials formatted into the metadata log."""
        config: dict[str, str] = {}
        mechanisms = settings.get("sasl.enabled.mechanisms", "GSSAPI").split(",")
        plain_users = {name: password for name, password, _ in self.users}
        for listener in (name for name in self.listeners if name.startswith("SASL_")):
            prefix = f"listener.name.{listener.lower()}"
            for mechanism in (m.strip() for m in mechanisms):
                if mechanism == "PLAIN":
                    entries = "".join(f' user_{name}="{password}"' for name, password in plain_users.items())
                    config[f"{prefix}.plain.sasl.jaas.config"] = f"{PLAIN_LOGIN} required{entries};"
                elif mechanism in SCRAM_MECHANISMS:
                    config[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = f"{SCRAM_LOGIN} required;"
        return config

    def _format_args(self, config: Path) -> list[str]:
        args = ["format", "-t", self.quorum.cluster_id if self.quorum else cluster_id(), "-c", str(config)]
        for name, password, mechanism in self.users:
            if mechanism not in SCRAM_MECHANISMS:
                raise ValueError(f"users are SCRAM credentials; {mechanism} is not a SCRAM mechanism")
            args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        return args

    def start(self, timeout: float = 90.0) -> str:
        """Format a fresh KRaft storage dir (not on a restart), start the broker on new ports, return
        once it answers Metadata."""
        for _ in range(3):  # a port handed out by the OS can be taken again before Kafka binds it
            self.launch()
            deadline = time.monotonic() + timeout
            if self._wait_ready(deadline) and self._warm_up(deadline):
                return self.bootstrap
            self.stop()
            if "Address already in use" not in self.log():
                break
        raise RuntimeError(f"Kafka {self.version} did not start within {timeout}s:\n{self.log()[-3000:]}")

    def launch(self) -> None:
        """Write the config (ports bound now), format the storage dir unless it holds data already (a
        restart keeps it), and start the JVM without waiting for it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j.properties").write_text(LOG4J.format(level=self.log_level, path=self.log_path))
        config = self._configure()
        if not (self.data_dir / "logs" / "meta.properties").exists():
            formatted = subprocess.run(self._java("kafka.tools.StorageTool", *self._format_args(config)),
                                       check=False, capture_output=True, text=True, timeout=120)
            if formatted.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed:\n{formatted.stdout[-2000:]}"
                                   f"{formatted.stderr[-3000:]}")
        with open(self.data_dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(config), jvm=jvm_options(self.heap)),
                                         stdout=out, stderr=subprocess.STDOUT, cwd=self.data_dir)
        _running.add(self)

    def _wait_ready(self, deadline: float, brokers: int = 1) -> bool:
        """Until this node answers Metadata naming at least `brokers` registered brokers. Asked
        on a raw connection: kafka-python's admin client, made while the JVM was not listening
        yet, waited out a 5 s timeout before its first request after the node had started."""
        from kafka.protocol.metadata import MetadataRequest

        from tests.kit.wire import WireClient

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:  # not listening yet, or not yet registered with its controller
                client = WireClient(self.bootstrap, timeout=5)
            except OSError:
                time.sleep(0.1)
                continue
            try:
                if len(client.request(MetadataRequest[1](topics=[])).brokers) >= brokers:
                    return True
            except (OSError, AssertionError):
                pass
            finally:
                client.close()
            time.sleep(0.1)
        return False

    def _warm_up(self, deadline: float) -> bool:
        """Wait until the group coordinator and producer-id allocation answer, as on a broker that has
        been running (the reference recordings' broker): a fresh one answers COORDINATOR_NOT_AVAILABLE
        until it has created and loaded __consumer_offsets, and COORDINATOR_LOAD_IN_PROGRESS to
        InitProducerId for a moment after start."""
        from kafka.protocol.metadata import FindCoordinatorRequest
        from kafka.protocol.producer import InitProducerIdRequest

        from tests.kit.wire import WireClient

        client = WireClient(self.bootstrap)
        try:
            while time.monotonic() < deadline:
                found = client.request(FindCoordinatorRequest[1](key="oracle-warm-up", key_type=0))
                producer = client.request(InitProducerIdRequest[1](transactional_id=None,
                                                                   transaction_timeout_ms=60000))
                if found.error_code == 0 and producer.error_code == 0:
                    return True
                time.sleep(0.2)
            return False
        finally:
            client.close()

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        stop_process(self.proc, grace=timeout)
        _running.discard(self)
        return self.proc.returncode

    def log(self) -> str:
        text = ""
        for path in (self.data_dir / "stdout.log", self.log_path):
            if path.exists():
                text += path.read_text(errors="replace")
        return text
