"""Which broker settings change while the broker runs, and how a change is checked: Kafka 4.4's
dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs, DynamicBrokerConfig.validateConfigs
and its reconfigurables' checks), with Kafka's error codes and messages.

A setting is set for one broker (resource name: its node id) or for every broker (the cluster-wide
default, an empty name). The broker keeps the changes (broker/handlers/broker_configs.py) and puts
APPLIED ones in force (Broker.refresh_dynamic); those Gregor reads at start only (NOT_APPLIED) are
refused as Kafka refuses a static setting; the rest of Kafka's dynamic settings have no counterpart
in Gregor (threads of a JVM broker, remote storage, Kerberos) and are kept and described as Kafka
keeps them, with no effect. Pure data and checks: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config import SETTINGS
from broker.security import dynamic_tls
from broker.topic_configs import BOOLEAN, CLASS, DOUBLE, INT, LIST, LONG, PASSWORD, SHORT, STRING
from protocol.errors import ErrorCode

DEFAULT_NODE = -1  # the state key's node id of a cluster-wide default (Kafka's empty resource name)
LISTENER_PREFIX = "listener.name."

# Kafka 4.4.0's dynamic broker configs: (name, config_type, default), as a live broker describes
# them (read_only false in DescribeConfigs of its BROKER resource)
KAFKA_DYNAMIC: tuple[tuple[str, int, str | None], ...] = (
    ('background.threads', INT, '10'),
    ('compression.gzip.level', INT, '-1'),
    ('compression.lz4.level', INT, '9'),
    ('compression.type', STRING, 'producer'),
    ('compression.zstd.level', INT, '3'),
    ('config.providers', LIST, ''),
    ('cordoned.log.dirs', LIST, ''),
    ('errors.deadletterqueue.auto.create.topics.enable', BOOLEAN, 'false'),
    ('errors.deadletterqueue.topic.name.prefix', STRING, 'dlq.'),
    ('follower.fetch.last.tiered.offset.enable', BOOLEAN, 'false'),
    ('group.consumer.assignment.interval.ms', INT, '1000'),
    ('group.coordinator.cached.buffer.max.bytes', INT, '1048588'),
    ('group.share.assignment.interval.ms', INT, '1000'),
    ('group.streams.assignment.interval.ms', INT, '1000'),
    ('listener.security.protocol.map', STRING, 'SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT'),
    ('listeners', LIST, 'PLAINTEXT://:9092'),
    ('log.cleaner.backoff.ms', LONG, '15000'),
    ('log.cleaner.dedupe.buffer.size', LONG, '134217728'),
    ('log.cleaner.delete.retention.ms', LONG, '86400000'),
    ('log.cleaner.io.buffer.load.factor', DOUBLE, '0.9'),
    ('log.cleaner.io.buffer.size', INT, '524288'),
    ('log.cleaner.io.max.bytes.per.second', DOUBLE, '1.7976931348623157E308'),
    ('log.cleaner.max.compaction.lag.ms', LONG, '9223372036854775807'),
    ('log.cleaner.min.cleanable.ratio', DOUBLE, '0.5'),
    ('log.cleaner.min.compaction.lag.ms', LONG, '0'),
    ('log.cleaner.threads', INT, '1'),
    ('log.cleanup.policy', LIST, 'delete'),
    ('log.flush.interval.messages', LONG, '9223372036854775807'),
    ('log.flush.interval.ms', LONG, None),
    ('log.index.interval.bytes', INT, '4096'),
    ('log.index.size.max.bytes', INT, '10485760'),
    ('log.local.retention.bytes', LONG, '-2'),
    ('log.local.retention.ms', LONG, '-2'),
    ('log.message.timestamp.after.max.ms', LONG, '3600000'),
    ('log.message.timestamp.before.max.ms', LONG, '9223372036854775807'),
    ('log.message.timestamp.type', STRING, 'CreateTime'),
    ('log.preallocate', BOOLEAN, 'false'),
    ('log.remote.copy.lag.bytes', LONG, '-1'),
    ('log.remote.copy.lag.ms', LONG, '0'),
    ('log.retention.bytes', LONG, '-1'),
    ('log.retention.ms', LONG, None),
    ('log.roll.jitter.ms', LONG, None),
    ('log.roll.ms', LONG, None),
    ('log.segment.bytes', INT, '1073741824'),
    ('log.segment.delete.delay.ms', LONG, '60000'),
    ('max.connection.creation.rate', INT, '2147483647'),
    ('max.connections', INT, '2147483647'),
    ('max.connections.per.ip', INT, '2147483647'),
    ('max.connections.per.ip.overrides', STRING, ''),
    ('max.decompressed.message.bytes', INT, '2147483639'),
    ('message.max.bytes', INT, '1048588'),
    ('metric.reporters', LIST, 'org.apache.kafka.common.metrics.JmxReporter'),
    ('min.insync.replicas', INT, '1'),
    ('num.io.threads', INT, '8'),
    ('num.network.threads', INT, '3'),
    ('num.recovery.threads.per.data.dir', INT, '2'),
    ('num.replica.fetchers', INT, '1'),
    ('principal.builder.class', CLASS, 'org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder'),
    ('producer.id.expiration.ms', INT, '86400000'),
    ('remote.fetch.max.wait.ms', INT, '500'),
    ('remote.list.offsets.request.timeout.ms', LONG, '30000'),
    ('remote.log.index.file.cache.total.size.bytes', LONG, '1073741824'),
    ('remote.log.manager.copier.thread.pool.size', INT, '10'),
    ('remote.log.manager.copy.max.bytes.per.second', LONG, '9223372036854775807'),
    ('remote.log.manager.expiration.thread.pool.size', INT, '10'),
    ('remote.log.manager.fetch.max.bytes.per.second', LONG, '9223372036854775807'),
    ('remote.log.manager.follower.thread.pool.size', INT, '2'),
    ('remote.log.reader.threads', INT, '10'),
    ('sasl.enabled.mechanisms', LIST, 'GSSAPI'),
    ('sasl.jaas.config', PASSWORD, None),
    ('sasl.kerberos.kinit.cmd', STRING, '/usr/bin/kinit'),
    ('sasl.kerberos.min.time.before.relogin', LONG, '60000'),
    ('sasl.kerberos.principal.to.local.rules', LIST, 'DEFAULT'),
    ('sasl.kerberos.service.name', STRING, None),
    ('sasl.kerberos.ticket.renew.jitter', DOUBLE, '0.05'),
    ('sasl.kerberos.ticket.renew.window.factor', DOUBLE, '0.8'),
    ('sasl.login.refresh.buffer.seconds', SHORT, '300'),
    ('sasl.login.refresh.min.period.seconds', SHORT, '60'),
    ('sasl.login.refresh.window.factor', DOUBLE, '0.8'),
    ('sasl.login.refresh.window.jitter', DOUBLE, '0.05'),
    ('sasl.mechanism.inter.broker.protocol', STRING, 'GSSAPI'),
    ('share.coordinator.cached.buffer.max.bytes', INT, '1048588'),
    ('ssl.cipher.suites', LIST, ''),
    ('ssl.client.auth', STRING, 'none'),
    ('ssl.enabled.protocols', LIST, 'TLSv1.2,TLSv1.3'),
    ('ssl.endpoint.identification.algorithm', STRING, 'https'),
    ('ssl.engine.factory.class', CLASS, None),
    ('ssl.key.password', PASSWORD, None),
    ('ssl.keymanager.algorithm', STRING, 'SunX509'),
    ('ssl.keystore.certificate.chain', PASSWORD, None),
    ('ssl.keystore.key', PASSWORD, None),
    ('ssl.keystore.location', STRING, None),
    ('ssl.keystore.password', PASSWORD, None),
    ('ssl.keystore.type', STRING, 'JKS'),
    ('ssl.protocol', STRING, 'TLSv1.3'),
    ('ssl.provider', STRING, None),
    ('ssl.secure.random.implementation', STRING, None),
    ('ssl.trustmanager.algorithm', STRING, 'PKIX'),
    ('ssl.truststore.certificates', PASSWORD, None),
    ('ssl.truststore.location', STRING, None),
    ('ssl.truststore.password', PASSWORD, None),
    ('ssl.truststore.type', STRING, 'JKS'),
    ('transaction.partition.verification.enable', BOOLEAN, 'true'),
    ('unclean.leader.election.enable', BOOLEAN, 'false'),
)
DYNAMIC = {name: (kind, default) for name, kind, default in KAFKA_DYNAMIC}

# Gregor's settings put in force when changed (Broker.refresh_dynamic); the other Gregor settings in
# DYNAMIC are read once at start (listeners, TLS contexts, SASL, the share groups' dead-letter
# topics), so a change is refused as Kafka refuses a static one; so is a listener-prefixed name but
# for a TLS listener's files (broker/security/dynamic_tls.py)
APPLIED = frozenset({
    "log.retention.ms", "log.retention.bytes", "log.cleaner.backoff.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.message.timestamp.type", "message.max.bytes", "min.insync.replicas", "max.connections",
    "max.connections.per.ip"})
# ... and the broker defaults of topic configs that Gregor takes from each topic only
NOT_APPLIED = frozenset({n for n in DYNAMIC if n in SETTINGS and n not in APPLIED}
                        | {"log.cleanup.policy", "compression.type"})

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix
PER_LISTENER = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates"})
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
# the listener and security settings Kafka takes per broker only (DynamicBrokerConfig.PerBrokerConfigs)
PER_BROKER = frozenset(n for n in DYNAMIC if n.startswith(("ssl.", "sasl.", "listener"))
                       or n == "principal.builder.class")

# Kafka's ConfigDef lower bounds (its message: "Value must be at least N")
AT_LEAST = {
    "background.threads": 1, "compression.lz4.level": 1, "group.consumer.assignment.interval.ms": 0,
    "group.coordinator.cached.buffer.max.bytes": 524288, "group.share.assignment.interval.ms": 0,
    "group.streams.assignment.interval.ms": 0, "log.cleaner.backoff.ms": 0, "log.cleaner.delete.retention.ms": 0,
    "log.cleaner.io.buffer.size": 0, "log.cleaner.max.compaction.lag.ms": 1, "log.cleaner.min.cleanable.ratio": 0,
    "log.cleaner.min.compaction.lag.ms": 0, "log.cleaner.threads": 0, "log.flush.interval.messages": 1,
    "log.index.interval.bytes": 0, "log.index.size.max.bytes": 4, "log.local.retention.bytes": -2,
    "log.local.retention.ms": -2, "log.message.timestamp.after.max.ms": 0, "log.message.timestamp.before.max.ms": 0,
    "log.remote.copy.lag.bytes": -1, "log.remote.copy.lag.ms": -1, "log.segment.bytes": 1048576,
    "log.segment.delete.delay.ms": 0, "max.connection.creation.rate": 0, "max.connections": 0,
    "max.connections.per.ip": 0, "max.decompressed.message.bytes": 1, "message.max.bytes": 0,
    "min.insync.replicas": 1, "num.io.threads": 1, "num.network.threads": 1, "num.recovery.threads.per.data.dir": 1,
    "num.replica.fetchers": 1, "producer.id.expiration.ms": 1, "remote.fetch.max.wait.ms": 1,
    "remote.list.offsets.request.timeout.ms": 1, "remote.log.index.file.cache.total.size.bytes": 1,
    "remote.log.manager.copier.thread.pool.size": 1, "remote.log.manager.copy.max.bytes.per.second": 1,
    "remote.log.manager.expiration.thread.pool.size": 1, "remote.log.manager.fetch.max.bytes.per.second": 1,
    "remote.log.manager.follower.thread.pool.size": 1, "remote.log.reader.threads": 1,
}
AT_MOST = {"log.cleaner.min.cleanable.ratio": 1}
ONE_OF = {"log.message.timestamp.type": ("CreateTime", "LogAppendTime"), "log.cleanup.policy": ("compact", "delete"),
          "ssl.client.auth": ("required", "requested", "none")}
# thread pools a change may at most double or halve (DynamicThreadPool.validateReconfiguration)
THREAD_POOLS = ("num.io.threads", "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                "background.threads", "remote.log.manager.copier.thread.pool.size",
                "remote.log.manager.expiration.thread.pool.size", "remote.log.reader.threads")
_JAVA_TYPES = {INT: ("INT", -2**31, 2**31 - 1), SHORT: ("SHORT", -2**15, 2**15 - 1), LONG: ("LONG", -2**63, 2**63 - 1)}

Problem = tuple[ErrorCode, str]


def base_name(name: str) -> str:
    """`ssl.client.auth` of `listener.name.ssl.ssl.client.auth`; other names as they are."""
    if name.startswith(LISTENER_PREFIX):
        rest = name[len(LISTENER_PREFIX):]
        return rest.partition(".")[2] or name
    return name


def _listed(names) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def _value_problem(name: str, value: str) -> str | None:
    """Kafka's ConfigDef message for a value of the wrong type or out of range, or None."""
    kind = DYNAMIC[name][0]
    text = value.strip()
    if kind in _JAVA_TYPES:
        type_name, low, high = _JAVA_TYPES[kind]
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            return f"Invalid value {value} for configuration {name}: Not a number of type {type_name}"
        shown = str(number)
    elif kind == DOUBLE:
        try:
            number = float(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
        shown = repr(number)  # as Java's Double.toString: 2.0
    elif kind == BOOLEAN:
        if text.lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
        return None
    else:
        choices = ONE_OF.get(name)
        items = [v.strip() for v in text.split(",") if v.strip()] if kind == LIST else [text]
        if choices and any(v not in choices for v in items):
            return f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(choices)}"
        return None
    if name == "compression.gzip.level" and not (1 <= number <= 9 or number == -1):
        return f"Invalid value {shown} for configuration {name}: Value must be between 1 and 9 or equal to -1"
    if name in AT_LEAST and number < AT_LEAST[name]:
        return f"Invalid value {shown} for configuration {name}: Value must be at least {AT_LEAST[name]}"
    if name in AT_MOST and number > AT_MOST[name]:
        return f"Invalid value {shown} for configuration {name}: Value must be no more than {AT_MOST[name]}"
    return None


def _reconfiguration_problem(name: str, value: str, current: Mapping[str, str]) -> str | None:
    """What Kafka's reconfigurables refuse of a well-typed value, given the values in force."""
    if name in THREAD_POOLS or name == "log.cleaner.threads":
        new, old = int(value.strip()), int(current.get(name) or DYNAMIC[name][1])
        if name == "log.cleaner.threads":
            if new == 0:  # Kafka's LogCleaner divides by it before it checks
                return "/ by zero"
            what = "Log cleaner threads cannot be"
            if new > 2 * old:
                return (f"Invalid value org.apache.kafka.common.config.ConfigException: {what} increased to more "
                        f"than double the current value {old} for configuration Invalid dynamic configuration")
            if new < old / 2:
                return (f"Invalid value org.apache.kafka.common.config.ConfigException: {what} reduced to less "
                        f"than half the current value {old} for configuration Invalid dynamic configuration")
            return None
        prefix = (f"Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update "
                  f"validation failed for {name}={new}, value should ")
        if new > 2 * old:
            return (f"{prefix}not be greater than double the current value {old} for configuration Invalid dynamic "
                    "configuration")
        if new < old / 2:
            return f"{prefix}be at least half the current value {old} for configuration Invalid dynamic configuration"
    elif name == "log.cleaner.dedupe.buffer.size":
        threads = int(current.get("log.cleaner.threads") or DYNAMIC["log.cleaner.threads"][1])
        if int(value.strip()) / max(threads, 1) < 1024 * 1024:
            return "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    elif name == "max.connections.per.ip" and int(value.strip()) == 0 and not current.get(
            "max.connections.per.ip.overrides"):
        return ("requirement failed: max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides property is set.")
    elif name in ("log.roll.ms", "log.roll.jitter.ms"):
        least = 1 if name == "log.roll.ms" else 0
        if int(value.strip()) < least:
            return f"requirement failed: {name} must be greater than or equal to {least}"
    return None


def change_problem(changes: Mapping[str, str | None], per_broker: bool,
                   current: Mapping[str, str]) -> Problem | None:
    """Kafka's answer to a change of dynamic broker configs (a value of None: deleted), in Kafka's
    order of checks, or None when it may be kept. `current`: the values in force, by name."""
    static = [n for n in changes if base_name(n) not in DYNAMIC]  # Kafka keeps a name it does not know
    if static:
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {_listed(static)}"
    unprefixed = [n for n in changes if n in PER_LISTENER]
    if unprefixed:
        return (ErrorCode.INVALID_REQUEST,
                ("These security configs can be dynamically updated only per-listener using the listener prefix: "
                 f"{_listed(unprefixed)}"))
    for name, value in changes.items():
        if value is not None and (problem := _value_problem(base_name(name), value)):
            return ErrorCode.INVALID_REQUEST, problem
    if not per_broker:
        here = [n for n in changes if n in PER_BROKER or (
            n.startswith(LISTENER_PREFIX) and base_name(n) not in _CLUSTER_LEVEL_LISTENER)]
        if here:
            return (ErrorCode.INVALID_REQUEST, ("Cannot update these configs at default cluster level, broker id "
                                                f"must be specified: {_listed(here)}"))
    kept_static = [n for n in changes if n in NOT_APPLIED or (n.startswith(LISTENER_PREFIX)
                                                               and dynamic_tls.split(n) is None)]
    if kept_static:  # Gregor reads them at start only
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {_listed(kept_static)}"
    for name, value in changes.items():
        if value is not None and (problem := _reconfiguration_problem(name, value, current)):
            return ErrorCode.INVALID_REQUEST, problem
    return None


def config_type(name: str) -> int:
    """DescribeConfigs' config_type of a dynamic setting (or of its base name, listener-prefixed)."""
    return DYNAMIC.get(base_name(name), (STRING, None))[0]
