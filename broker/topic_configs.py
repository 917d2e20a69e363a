"""Kafka 3.9's topic configs with their defaults and types, as a real broker
reports them (recorded in tests/conformance/reference/kafka-3.9.0, 09_describe_configs_topic),
plus Gregor's own topic configs, and what each does in Gregor (DescribeConfigs' documentation).
Broker-wide settings override the defaults of the topic configs they correspond to (see
Broker.topic_config and broker/config_sources.py).
"""

from __future__ import annotations

# DescribeConfigs config_type values (KIP-569)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)

# (name, default value, config_type)
KAFKA_TOPIC_CONFIGS: tuple[tuple[str, str | None, int], ...] = (
    ('cleanup.policy', 'delete', 7),
    ('compression.gzip.level', '-1', 3),
    ('compression.lz4.level', '9', 3),
    ('compression.type', 'producer', 2),
    ('compression.zstd.level', '3', 3),
    ('delete.retention.ms', '86400000', 5),
    ('file.delete.delay.ms', '60000', 5),
    ('flush.messages', '9223372036854775807', 5),
    ('flush.ms', '9223372036854775807', 5),
    ('follower.replication.throttled.replicas', '', 7),
    ('index.interval.bytes', '4096', 3),
    ('leader.replication.throttled.replicas', '', 7),
    ('local.retention.bytes', '-2', 5),
    ('local.retention.ms', '-2', 5),
    ('max.compaction.lag.ms', '9223372036854775807', 5),
    ('max.message.bytes', '1048588', 3),
    ('message.downconversion.enable', 'true', 1),
    ('message.format.version', '3.0-IV1', 2),
    ('message.timestamp.after.max.ms', '9223372036854775807', 5),
    ('message.timestamp.before.max.ms', '9223372036854775807', 5),
    ('message.timestamp.difference.max.ms', '9223372036854775807', 5),
    ('message.timestamp.type', 'CreateTime', 2),
    ('min.cleanable.dirty.ratio', '0.5', 6),
    ('min.compaction.lag.ms', '0', 5),
    ('min.insync.replicas', '1', 3),
    ('preallocate', 'false', 1),
    ('remote.log.copy.disable', 'false', 1),
    ('remote.log.delete.on.disable', 'false', 1),
    ('remote.storage.enable', 'false', 1),
    ('retention.bytes', '-1', 5),
    ('retention.ms', '604800000', 5),
    ('segment.bytes', '1073741824', 3),
    ('segment.index.bytes', '10485760', 3),
    ('segment.jitter.ms', '0', 5),
    ('segment.ms', '604800000', 5),
    ('unclean.leader.election.enable', 'false', 1),
)

# Gregor's own topic configs (MetaQ extensions).
GREGOR_TOPIC_CONFIGS: tuple[tuple[str, str | None, int], ...] = (
    ("tag.header", "", STRING),          # record header whose value is the MetaQ tag
    ("key.index.enable", "true", BOOLEAN),  # index record keys for `gregor query --key` (off the write path)
    ("view.source", "", STRING),         # this topic is a read-only view of that topic (broker/views/definition.py)
    ("view.tags", "", STRING),           # comma-separated tags the view lets through
    # Kafka 4.4's (KIP-1191), not Kafka 3.9's: this topic may be a share group's dead-letter topic
    ("errors.deadletterqueue.group.enable", "false", BOOLEAN),
)

TOPIC_CONFIGS = {name: (default, kind) for name, default, kind in KAFKA_TOPIC_CONFIGS + GREGOR_TOPIC_CONFIGS}

# Kafka 3.9's MetadataVersion names, which message.format.version must be one of (Kafka checks
# the value and then ignores it: from 3.0 on every log is RecordBatch v2, as Gregor's is).
_RELEASES = {"0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1,
             "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1,
             "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3,
             "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1}  # release: its count of IV versions (none before 0.10)
METADATA_VERSIONS = frozenset(
    list(_RELEASES)  # a release names its latest IV
    + [f"{release}-IV{i}" for release, count in _RELEASES.items() for i in range(count)]
    + ["4.0-IV0", "4.0-IV1"])  # 4.0 is not released in 3.9: only its IV names


def _metadata_version_error(value: str) -> str | None:
    """Kafka's MetadataVersion.fromVersionString: the first three dot-separated parts count for
    a 0.x version, two otherwise (0.10.0.1 is 0.10.0, 3.0.1 is 3.0)."""
    parts = value.split(".")
    keep = 3 if value.startswith("0.") else 2
    key = value if keep >= len(parts) else ".".join(parts[:keep])
    return None if key in METADATA_VERSIONS else f"Version {value} is not a valid version"


def config_error(name: str, value: str | None) -> str | None:
    """Kafka's message for a bad topic config, or None when it is acceptable."""
    if name not in TOPIC_CONFIGS:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic configs: {name}"
    kind = TOPIC_CONFIGS[name][1]
    if kind in (INT, SHORT, LONG):
        try:
            number = int(value.strip())
        except ValueError:
            type_name = {INT: "INT", SHORT: "SHORT", LONG: "LONG"}[kind]
            return f"Invalid value {value} for configuration {name}: Not a number of type {type_name}"
        if name == "min.insync.replicas" and number < 1:
            return f"Invalid value {value} for configuration {name}: Value must be at least 1"
    elif kind == DOUBLE:
        try:
            float(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
    elif kind == BOOLEAN and value.strip().lower() not in ("true", "false"):
        return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
    elif name == "message.format.version" and (why := _metadata_version_error(value)):
        return f"Invalid value {value} for configuration {name}: {why}"
    return None


_NO_EFFECT = "Accepted and described; no effect in Gregor: "
# DescribeConfigs' documentation (v3+, include_documentation): what each topic config does in Gregor
TOPIC_CONFIG_DOCS: dict[str, str] = {
    "cleanup.policy": ("delete, compact or both: delete drops records past retention.ms / retention.bytes, compact "
                       "keeps the latest record of every key (the log cleaner)"),
    "compression.gzip.level": _NO_EFFECT + "a re-encoded set takes the codec's default level",
    "compression.lz4.level": _NO_EFFECT + "a re-encoded set takes the codec's default level",
    "compression.type": ("the codec of record sets converted from message format v0/v1 on append (producer: as "
                         "sent); v2 batches are stored as the producer sent them"),
    "compression.zstd.level": _NO_EFFECT + "a re-encoded set takes the codec's default level",
    "delete.retention.ms": "how long a tombstone of a compacted topic is kept once a clean has passed it",
    "file.delete.delay.ms": _NO_EFFECT + "Gregor deletes whole commitlog segments shared by every topic",
    "flush.messages": _NO_EFFECT + "durability is the broker's flush.mode and flush.interval.ms",
    "flush.ms": _NO_EFFECT + "durability is the broker's flush.mode and flush.interval.ms",
    "follower.replication.throttled.replicas": _NO_EFFECT + "replication is not throttled",
    "index.interval.bytes": _NO_EFFECT + "every record batch has a consume-queue entry",
    "leader.replication.throttled.replicas": _NO_EFFECT + "replication is not throttled",
    "local.retention.bytes": _NO_EFFECT + "there is no tiered storage",
    "local.retention.ms": _NO_EFFECT + "there is no tiered storage",
    "max.compaction.lag.ms": "a dirty record of a compacted topic older than this forces a clean",
    "max.message.bytes": "the largest record batch this topic takes (MESSAGE_TOO_LARGE above it)",
    "message.downconversion.enable": ("false: a consumer of message format v0/v1 (an old Fetch) of this topic is "
                                      "answered UNSUPPORTED_VERSION"),
    "message.format.version": _NO_EFFECT + "every batch is stored as RecordBatch v2 (checked, then ignored, as Kafka)",
    "message.timestamp.after.max.ms": _NO_EFFECT + "record timestamps are not checked",
    "message.timestamp.before.max.ms": _NO_EFFECT + "record timestamps are not checked",
    "message.timestamp.difference.max.ms": _NO_EFFECT + "record timestamps are not checked",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps, LogAppendTime sets the broker's",
    "min.cleanable.dirty.ratio": "the share of a compacted partition's records superseded before it is cleaned",
    "min.compaction.lag.ms": "records younger than this are not compacted",
    "min.insync.replicas": "acks=all produce needs this many nodes in the sync-state set (NOT_ENOUGH_REPLICAS)",
    "preallocate": _NO_EFFECT + "commitlog segments are always preallocated",
    "remote.log.copy.disable": _NO_EFFECT + "there is no tiered storage",
    "remote.log.delete.on.disable": _NO_EFFECT + "there is no tiered storage",
    "remote.storage.enable": _NO_EFFECT + "there is no tiered storage",
    "retention.bytes": "the most bytes each partition keeps before its oldest batches go (-1: no limit)",
    "retention.ms": "how long a batch is kept once all its records are older than this (-1: for good)",
    "segment.bytes": _NO_EFFECT + "partitions have no segments of their own (the commitlog's: commitlog.segment.bytes)",
    "segment.index.bytes": _NO_EFFECT + "partitions have no segments of their own",
    "segment.jitter.ms": _NO_EFFECT + "partitions have no segments of their own",
    "segment.ms": _NO_EFFECT + "partitions have no segments of their own",
    "unclean.leader.election.enable": _NO_EFFECT + "only a node of the sync-state set becomes master",
    "tag.header": "the record header whose value is the record's MetaQ tag (fixed at creation)",
    "key.index.enable": "index record keys for `gregor query --key`",
    "view.source": "this topic is a read-only view of that topic (fixed at creation)",
    "view.tags": "the tags the view lets through, comma-separated (fixed at creation)",
    "errors.deadletterqueue.group.enable": "this topic may be a share group's dead-letter topic",
}
