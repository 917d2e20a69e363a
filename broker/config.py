"""Broker configuration: Kafka's setting names and defaults where Kafka has the
setting, plain descriptive names for the MetaQ-specific ones.

Sources, later ones winning: defaults, a Java-style properties file
(`--config FILE`), then `--set KEY=VALUE`. Unknown names and bad values are
refused at start with a message that names the setting.
"""

from __future__ import annotations

import difflib
import ipaddress
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.net import listeners as listeners_module
from broker.cluster import sasl as node_sasl
from broker.cluster import tls as node_tls
from broker.security.acl import AUTHORIZER_CLASSES
from broker.net.listeners import SASL_MECHANISMS, Listener, ListenerError
from store import StoreConfig

# The replica selector Kafka's follower fetching (KIP-392) names; Gregor's choice is the same
REPLICA_SELECTORS = ("org.apache.kafka.common.replica.RackAwareReplicaSelector",)


class ConfigError(ValueError):
    pass


class StartupError(Exception):
    """What keeps a broker from starting, in one line for the operator (`gregor serve` prints it:
    a port in use, ZooKeeper out of reach, a data directory another broker holds)."""


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _flush_mode(text: str) -> str:
    if text not in ("async", "sync"):
        raise ValueError(f"expected async or sync, got {text!r}")
    return text


# name -> (parser, default, description)
SETTINGS: dict[str, tuple[Callable[[str], Any], Any, str]] = {
    "node.id": (int, 0, "this broker's node id"),
    "advertised.host": (str, "", "host put in Metadata (default: the bind host)"),
    "advertised.port": (int, 0, "port put in Metadata (default: the bound port)"),
    "listeners": (str, "", ("NAME://HOST:PORT[,...], NAME one of PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL "
                            "(default: one PLAINTEXT listener on --host/--port)")),
    "advertised.listeners": (str, "", "NAME://HOST:PORT[,...] clients are told per listener (default: as bound)"),
    "sasl.enabled.mechanisms": (str, "SCRAM-SHA-256,SCRAM-SHA-512",
                                "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    "connections.max.reauth.ms": (int, 0, "SASL session lifetime; clients re-authenticate before it ends (0: none)"),
    "connection.failed.authentication.delay.ms": (int, 100, "delay before a failed authentication is answered"),
    "sasl.server.max.receive.size": (int, 524288, "largest SASL token accepted before authentication"),
    "ssl.keystore.type": (str, "PEM", "PEM only: the keystore and truststore are PEM files"),
    "ssl.keystore.location": (str, "", "PEM file with the private key and certificate chain (SSL, SASL_SSL listeners)"),
    "ssl.key.password": (str, "", "password of an encrypted private key in the keystore"),
    "ssl.truststore.type": (str, "PEM", "PEM only"),
    "ssl.truststore.location": (str, "", "PEM file of CA certificates that client certificates are checked against"),
    "ssl.client.auth": (str, "none", "none, requested or required: client certificates (mTLS)"),
    "ssl.allow.dn.changes": (_bool, False, ("a listener's certificate changed at runtime (listener.name.<l>."
                                            "ssl.keystore.location) may name another subject")),
    "ssl.allow.san.changes": (_bool, False, "... and other subjectAltNames"),
    "ssl.endpoint.identification.algorithm": (str, "https", ("https: a node checks that the certificate of the node "
                                                             "it replicates from names that node's host "
                                                             "(security.inter.broker.protocol=SSL); empty: not")),
    "authorizer.class.name": (str, "", ("Kafka's StandardAuthorizer or AclAuthorizer class name turns ACLs on "
                                        "(broker/security/acl.py); empty: every client may do everything")),
    "super.users": (str, "", "principals ACLs never restrict, ';'-separated: User:admin;User:CN=ops"),
    "allow.everyone.if.no.acl.found": (_bool, False, "allow an operation on a resource that no ACL names"),
    "failed.authentication.limit": (int, 10, ("failed logins of one user from one address within "
                                              "failed.authentication.window.ms after which each further failed "
                                              "login of it is answered twice as slowly, up to 5 s (a correct "
                                              "password is always answered at once); at the replication port, "
                                              "failures from one address after which its new connections are "
                                              "refused until the window passes (0: neither)")),
    "failed.authentication.window.ms": (int, 60000, "window of failed.authentication.limit"),
    "group.consumer.session.timeout.ms": (int, 45000, ("consumer-protocol groups (KIP-848): a member that sends no "
                                                       "heartbeat for this long is removed")),
    "group.consumer.heartbeat.interval.ms": (int, 5000, "consumer-protocol groups: how often members heartbeat"),
    "group.consumer.assignors": (str, "uniform,range", ("consumer-protocol groups: the server-side assignors members "
                                                        "may choose; the first is the default")),
    "group.consumer.max.size": (int, 2147483647, "consumer-protocol groups: most members in one group"),
    "group.consumer.migration.policy": (str, "bidirectional", (
        "whether a classic group with members becomes a consumer-protocol group when a member joins it with "
        "the consumer protocol (upgrade), and back when its last such member leaves (downgrade): disabled, "
        "upgrade, downgrade or bidirectional")),
    "group.consumer.min.session.timeout.ms": (int, 45000, "lowest group.consumer.session.timeout.ms allowed"),
    "group.consumer.max.session.timeout.ms": (int, 60000, "highest group.consumer.session.timeout.ms allowed"),
    "group.consumer.min.heartbeat.interval.ms": (int, 5000, "lowest group.consumer.heartbeat.interval.ms allowed"),
    "group.consumer.max.heartbeat.interval.ms": (int, 15000, "highest group.consumer.heartbeat.interval.ms allowed"),
    "group.share.session.timeout.ms": (int, 45000, ("share groups (KIP-932): a member that sends no heartbeat "
                                                    "for this long is removed and its records released")),
    "group.share.heartbeat.interval.ms": (int, 5000, "share groups: how often members heartbeat"),
    "group.share.min.session.timeout.ms": (int, 45000, "lowest share.session.timeout.ms a share group may set"),
    "group.share.max.session.timeout.ms": (int, 60000, "highest share.session.timeout.ms a share group may set"),
    "group.share.min.heartbeat.interval.ms": (int, 5000, "lowest share.heartbeat.interval.ms a share group may set"),
    "group.share.max.heartbeat.interval.ms": (int, 15000, "highest share.heartbeat.interval.ms a share group may set"),
    "group.share.max.size": (int, 200, "share groups: most members in one group"),
    "group.share.record.lock.duration.ms": (int, 30000, ("share groups: how long a member holds the records it "
                                                         "fetched before they go to another (the acquisition lock)")),
    "group.share.min.record.lock.duration.ms": (int, 15000, "lowest group.share.record.lock.duration.ms allowed"),
    "group.share.max.record.lock.duration.ms": (int, 60000, "highest group.share.record.lock.duration.ms allowed"),
    "group.share.delivery.count.limit": (int, 5, ("share groups: deliveries of a record after which it is archived "
                                                  "(or sent to the group's dead-letter topic) instead of redelivered")),
    "group.share.min.delivery.count.limit": (int, 2, "lowest group.share.delivery.count.limit allowed"),
    "group.share.max.delivery.count.limit": (int, 10, "highest group.share.delivery.count.limit allowed"),
    "group.share.partition.max.record.locks": (int, 2000, ("share groups: most records in flight (acquired or "
                                                           "waiting for redelivery) per share-partition")),
    "errors.deadletterqueue.topic.name.prefix": (str, "dlq.", ("share groups: the prefix every group's "
                                                                "errors.deadletterqueue.topic.name must have "
                                                                "(empty: any name)")),
    "errors.deadletterqueue.auto.create.topics.enable": (_bool, False, ("share groups: create a group's dead-letter "
                                                                        "topic when it first gets a record")),
    "group.share.max.share.sessions": (int, 2000, "share groups: most share sessions (one per member and broker)"),
    "admin.token": (str, "", ("bearer token the admin HTTP API requires (Authorization: Bearer TOKEN); "
                              "required when the API is bound beyond loopback")),
    "admin.principal": (str, "User:ANONYMOUS", ("principal the web console's actions (reset offsets, delete a "
                                                 "topic, create a view) are authorized as when ACLs are on")),
    "transaction.max.timeout.ms": (int, 900000, "largest transaction.timeout.ms a producer may ask"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        int, 10000, "how often transactions older than their timeout are looked for and aborted"),
    "zookeeper.connect": (str, "", ("HOST:PORT[,HOST:PORT][/chroot] of the ZooKeeper that coordinates a broker "
                                    "group (docs/replication.md); empty: a single broker")),
    "zookeeper.session.timeout.ms": (int, 18000, "ZooKeeper session timeout: how long a dead master goes unnoticed"),
    "zookeeper.connection.timeout.ms": (int, 18000, "how long a starting broker waits for ZooKeeper"),
    "broker.group": (str, "default", ("the broker group this node belongs to (RocketMQ's brokerName): its nodes "
                                      "replicate one commitlog")),
    "replication.port": (int, 0, ("port followers pull the commitlog from (RocketMQ's haListenPort; 0: any free "
                                  "port, published in ZooKeeper)")),
    "replication.advertised.listener": (str, "", ("HOST:PORT followers are told to pull from, when they must reach "
                                                 "this node another way than the bound replication port")),
    "security.inter.broker.protocol": (str, "PLAINTEXT", ("PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: the replication "
                                                          "port, where a group's nodes ship the commitlog and send "
                                                          "transaction markers; SSL: TLS with each node's certificate "
                                                          "checked both ways; SASL_*: each node logs in as the user of "
                                                          "sasl.jaas.config (docs/replication.md)")),
    "sasl.mechanism.inter.broker.protocol": (str, "GSSAPI", ("PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512: how a node logs "
                                                             "in to another (security.inter.broker.protocol=SASL_*); "
                                                             "Kafka's default GSSAPI is not served")),
    "sasl.jaas.config": (str, "", ("this node's login to other nodes with SASL_* between nodes, in Kafka's JAAS "
                                   "form: org.apache.kafka.common.security.scram.ScramLoginModule required "
                                   'username="NODE" password="SECRET";')),
    "replica.lag.time.max.ms": (int, 30000, "a follower not caught up within this leaves the sync-state set (ISR)"),
    "min.insync.replicas": (int, 1, "acks=all produce needs this many nodes in the sync-state set"),
    "controlled.shutdown.enable": (_bool, True, ("a master stopped cleanly (SIGTERM) refuses new writes and waits, "
                                                 "at most replica.lag.time.max.ms, until its sync-state set holds "
                                                 "all it wrote, then hands over (acks=1 records are kept too)")),
    "broker.rack": (str, "", "this node's rack, as Metadata lists it (Kafka's broker.rack)"),
    "replica.selector.class": (str, "", ("org.apache.kafka.common.replica.RackAwareReplicaSelector: the master "
                                         "sends a consumer whose client.rack is a follower's rack to that follower "
                                         "(KIP-392 follower fetching); empty: consumers read from the master")),
    "max.incremental.fetch.session.cache.slots": (int, 1000, ("incremental fetch sessions kept (KIP-227), split "
                                                              "evenly between 8 shards as Kafka's")),
    "num.partitions": (int, 1, "partitions of an auto-created topic"),
    "auto.create.topics.enable": (_bool, True, "create unknown topics on Metadata/Produce"),
    "default.replication.factor": (int, 1, "replication factor of topics created without one (a broker group's size)"),
    "message.max.bytes": (int, 1048588, "largest record batch accepted"),
    "socket.request.max.bytes": (int, 104857600, "largest request frame accepted"),
    "produce.splice.min.bytes": (int, 65536, ("a batch at least this large, one partition per Produce over plain "
                                              "TCP, goes from the socket to the commitlog by splice(2); 0: never")),
    "log.retention.ms": (int, 604800000, "delete commitlog segments older than this (-1: never)"),
    "log.retention.bytes": (int, -1, "keep at most this many commitlog bytes (-1: unlimited)"),
    "log.retention.check.interval.ms": (int, 300000, "how often retention runs"),
    "log.cleaner.enable": (_bool, True, "run the log cleaner for cleanup.policy=compact topics"),
    "log.cleaner.backoff.ms": (int, 15000, "how long the log cleaner sleeps between runs"),
    "log.cleaner.min.cleanable.ratio": (float, 0.5, "default min.cleanable.dirty.ratio of compacted topics"),
    "log.cleaner.delete.retention.ms": (int, 86400000, "default delete.retention.ms (tombstones)"),
    "log.cleaner.min.compaction.lag.ms": (int, 0, "default min.compaction.lag.ms"),
    "log.cleaner.max.compaction.lag.ms": (int, 9223372036854775807, "default max.compaction.lag.ms"),
    "log.message.timestamp.type": (str, "CreateTime", "CreateTime or LogAppendTime"),
    "commitlog.segment.bytes": (int, 1 << 30, "size of each preallocated commitlog segment"),
    "consumequeue.entries.per.file": (int, 300000, "20-byte entries per consume-queue file"),
    "flush.mode": (_flush_mode, "async", "async: flusher every flush.interval.ms; sync: group commit"),
    "flush.interval.ms": (int, 500, "async flush period"),
    "checkpoint.interval.ms": (int, 10_000, ("how often the commitlog and derived files are made durable and "
                                             "checkpointed: a crash recovery re-derives what followed")),
    "commitlog.verify.on.start": (_bool, True, "CRC-check the commitlog at start after a clean shutdown"),
    "group.initial.rebalance.delay.ms": (int, 3000, "delay of a new group's first rebalance"),
    "group.min.session.timeout.ms": (int, 6000, "smallest session timeout a member may ask"),
    "group.max.session.timeout.ms": (int, 1800000, "largest session timeout a member may ask"),
    "offsets.retention.minutes": (int, 10080, "reported; committed offsets are kept"),
    "producer.state.snapshot.interval.ms": (int, 30000, "how often idempotent-producer state is snapshotted"),
    "max.connections": (int, 2147483647, "connections accepted at once; more are closed at accept"),
    "max.connections.per.ip": (int, 2147483647, "connections accepted at once from one address"),
    "connections.max.idle.ms": (int, 600000, "close connections idle this long"),
    "request.timeout.ms": (int, 30000, "close a connection holding a partial frame this long"),
}


SENSITIVE_SETTINGS = frozenset({"ssl.key.password", "admin.token", "sasl.jaas.config"})  # never in DescribeConfigs or a log


def _loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost; an empty host binds every interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class BrokerConfig:
    data_dir: Path = Path("gregor-data")
    host: str = "127.0.0.1"
    port: int = 9092
    admin_port: int | None = None  # admin HTTP API (broker/net/admin_http.py); off when None
    values: dict[str, Any] = field(default_factory=lambda: {k: v[1] for k, v in SETTINGS.items()})
    explicit: set[str] = field(default_factory=set)  # names set by file or --set (STATIC_BROKER_CONFIG)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def set(self, name: str, text: str) -> None:
        if name not in SETTINGS:
            close = difflib.get_close_matches(name, SETTINGS, n=3)
            raise ConfigError(f"unknown setting {name!r}" + (f"; did you mean {' or '.join(close)}?" if close else
                                                              "; `gregor settings` lists them all"))
        parser = SETTINGS[name][0]
        try:
            self.values[name] = parser(text.strip())
        except ValueError as exc:
            raise ConfigError(f"bad value for {name}: {exc}") from None
        self.explicit.add(name)

    def load_properties(self, path: Path) -> None:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
            if sep < 0:
                raise ConfigError(f"{path}:{number}: expected KEY=VALUE, got {line!r}")
            self.set(line[:sep].strip(), line[sep + 1:])

    def _check_consumer_group_timing(self) -> None:
        """KIP-848's session and heartbeat settings within their bounds, the heartbeat below the
        session, as Kafka's broker checks them at start."""
        v = self.values
        for what in ("session.timeout", "heartbeat.interval"):
            low, high = v[f"group.consumer.min.{what}.ms"], v[f"group.consumer.max.{what}.ms"]
            value = v[f"group.consumer.{what}.ms"]
            if not 0 < low <= high:
                raise ConfigError(f"group.consumer.min.{what}.ms must be positive and at most "
                                  f"group.consumer.max.{what}.ms, got {low} and {high}")
            if not low <= value <= high:
                raise ConfigError(f"group.consumer.{what}.ms must be between group.consumer.min.{what}.ms "
                                  f"and group.consumer.max.{what}.ms ({low}-{high}), got {value}")
        if v["group.consumer.heartbeat.interval.ms"] >= v["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
        for what in ("record.lock.duration", "delivery.count", "session.timeout", "heartbeat.interval"):
            name = "delivery.count.limit" if what == "delivery.count" else f"{what}.ms"
            low_name = f"group.share.min.{name}"
            high_name = f"group.share.max.{name}"
            low, high, value = v[low_name], v[high_name], v[f"group.share.{name}"]
            if not 0 < low <= high:
                raise ConfigError(f"{low_name} must be positive and at most {high_name}, got {low} and {high}")
            if not low <= value <= high:
                raise ConfigError(f"group.share.{name} must be between {low_name} and {high_name} "
                                  f"({low}-{high}), got {value}")
        if v["group.share.heartbeat.interval.ms"] >= v["group.share.session.timeout.ms"]:
            raise ConfigError("group.share.heartbeat.interval.ms must be below group.share.session.timeout.ms")
        for name in ("group.share.max.size", "group.share.partition.max.record.locks", "group.share.max.share.sessions"):
            if v[name] <= 0:
                raise ConfigError(f"{name} must be positive, got {v[name]}")
        if v["group.consumer.migration.policy"].lower() not in ("disabled", "upgrade", "downgrade", "bidirectional"):
            raise ConfigError("group.consumer.migration.policy is disabled, upgrade, downgrade or bidirectional, "
                              f"got {v['group.consumer.migration.policy']!r}")
        unknown = [a for a in (x.strip() for x in v["group.consumer.assignors"].split(",")) if a
                   and a not in ("uniform", "range")]
        if unknown or not v["group.consumer.assignors"].strip():
            raise ConfigError(f"group.consumer.assignors are uniform and/or range, got {v['group.consumer.assignors']!r}")

    def validate(self) -> None:
        positive = ("num.partitions", "message.max.bytes", "socket.request.max.bytes",
                    "commitlog.segment.bytes", "consumequeue.entries.per.file", "flush.interval.ms",
                    "checkpoint.interval.ms", "log.cleaner.backoff.ms", "transaction.max.timeout.ms",
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms")
        for name in positive:
            if self.values[name] <= 0:
                raise ConfigError(f"{name} must be positive, got {self.values[name]}")
        if self.values["produce.splice.min.bytes"] < 0:
            raise ConfigError(f"produce.splice.min.bytes must be 0 (never) or more, got {self.values['produce.splice.min.bytes']}")
        if self.values["commitlog.segment.bytes"] < 4096:
            raise ConfigError("commitlog.segment.bytes must be at least 4096")
        if self.values["message.max.bytes"] + 256 > self.values["commitlog.segment.bytes"]:
            raise ConfigError("commitlog.segment.bytes must exceed message.max.bytes")
        if not 0 <= self.values["log.cleaner.min.cleanable.ratio"] <= 1:
            raise ConfigError("log.cleaner.min.cleanable.ratio must be between 0 and 1")
        if self.values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        if self.values["max.incremental.fetch.session.cache.slots"] < 0:
            raise ConfigError("max.incremental.fetch.session.cache.slots must be 0 or more")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be 0-65535, got {self.port}")
        self._check_consumer_group_timing()
        try:
            self.listeners()
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None
        unknown = [m for m in self.sasl_mechanisms() if m not in SASL_MECHANISMS]
        if unknown:
            raise ConfigError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported; Gregor serves "
                              f"{', '.join(SASL_MECHANISMS)}")
        if any(lst.tls for lst in self.listeners()):
            try:
                listeners_module.tls_context(self.values)
            except ListenerError as exc:
                raise ConfigError(str(exc)) from None
        if any(lst.sasl for lst in self.listeners()) and not self.sasl_mechanisms():
            raise ConfigError("sasl.enabled.mechanisms is empty but a SASL listener is configured")
        name = self.values["authorizer.class.name"].strip()
        if name and name not in AUTHORIZER_CLASSES:
            raise ConfigError(f"authorizer.class.name: {name} is not supported; Gregor's ACLs take "
                              f"{' or '.join(AUTHORIZER_CLASSES[:2])}")
        if self.values["zookeeper.connect"].strip():
            for name in ("zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms", "replica.lag.time.max.ms",
                         "min.insync.replicas"):
                if self.values[name] <= 0:
                    raise ConfigError(f"{name} must be positive, got {self.values[name]}")
            if not self.values["broker.group"].strip() or "/" in self.values["broker.group"]:
                raise ConfigError("broker.group must be a non-empty name without '/'")
            if self.values["node.id"] < 0:
                raise ConfigError("node.id must be 0 or more")
            try:
                node_tls.contexts(self.values)
                node_sasl.login_settings(self.values)
            except (ListenerError, OSError, ssl.SSLError) as exc:
                raise ConfigError(str(exc)) from None
        selector = self.values["replica.selector.class"].strip()
        if selector and selector not in REPLICA_SELECTORS:
            raise ConfigError(f"replica.selector.class: {selector} is not supported; Gregor's follower fetching "
                              f"takes {REPLICA_SELECTORS[0]}")
        advertised = self.values["replication.advertised.listener"].strip()
        if advertised:
            host, _, port = advertised.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ConfigError(f"replication.advertised.listener must be HOST:PORT, got {advertised!r}")
        if not 0 <= self.values["replication.port"] <= 65535:
            raise ConfigError(f"replication.port must be 0-65535, got {self.values['replication.port']}")
        if self.values["connections.max.reauth.ms"] < 0:
            raise ConfigError("connections.max.reauth.ms must be 0 or more")
        if self.values["failed.authentication.limit"] < 0:
            raise ConfigError("failed.authentication.limit must be 0 (no limit) or more")
        if self.values["failed.authentication.window.ms"] <= 0:
            raise ConfigError("failed.authentication.window.ms must be positive")
        if self.admin_port is not None and not self.values["admin.token"] and not _loopback(self.host):
            raise ConfigError(f"admin.token must be set: the admin HTTP API (--admin-port) would listen on "
                              f"{self.host or 'every interface'}, beyond loopback")

    def listeners(self) -> list[Listener]:
        """The listeners to open, with what clients are told; without `listeners`, one PLAINTEXT
        listener on --host/--port, advertised as advertised.host/advertised.port say."""
        text = self.values["listeners"]
        if not text.strip():
            return [Listener("PLAINTEXT", self.host, self.port, self.values["advertised.host"],
                             self.values["advertised.port"])]
        return listeners_module.with_advertised(listeners_module.parse(text), self.values["advertised.listeners"])

    def sasl_mechanisms(self) -> tuple[str, ...]:
        return tuple(m.strip().upper() for m in self.values["sasl.enabled.mechanisms"].split(",") if m.strip())

    @property
    def advertised_host(self) -> str:
        return self.values["advertised.host"] or self.host

    def store_config(self) -> StoreConfig:
        v = self.values
        return StoreConfig(
            segment_bytes=v["commitlog.segment.bytes"],
            queue_entries_per_file=v["consumequeue.entries.per.file"],
            flush_mode=v["flush.mode"],
            flush_interval_ms=v["flush.interval.ms"],
            checkpoint_interval_ms=v["checkpoint.interval.ms"],
            retention_ms=v["log.retention.ms"],
            retention_bytes=v["log.retention.bytes"],
            retention_check_interval_ms=v["log.retention.check.interval.ms"],
            node_id=v["node.id"],
            verify_on_start=v["commitlog.verify.on.start"],
            cleaner_enable=v["log.cleaner.enable"],
            cleaner_backoff_ms=v["log.cleaner.backoff.ms"],
            cleaner_min_cleanable_ratio=v["log.cleaner.min.cleanable.ratio"],
            cleaner_delete_retention_ms=v["log.cleaner.delete.retention.ms"],
            cleaner_min_compaction_lag_ms=v["log.cleaner.min.compaction.lag.ms"],
            cleaner_max_compaction_lag_ms=v["log.cleaner.max.compaction.lag.ms"],
        )
