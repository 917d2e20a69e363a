"""Where a config's value comes from, as DescribeConfigs reports it: a broker setting's layers
(dynamic for this broker, dynamic cluster-wide default, static, default), a topic config's and a
group config's synonyms, in Kafka 4.4's order (kafka.server.ConfigHelper.configSynonyms, DynamicBrokerConfig.
brokerConfigSynonyms, ServerTopicConfigSynonyms as a live 4.4.0 broker reports them).

Gregor has no log.retention.hours or log.retention.minutes: its default log.retention.ms of 7 days is
Kafka's, which Kafka states as log.retention.hours=168 (log.retention.ms has no default there), so
it is reported the same way. Pure functions over the layers; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import SETTINGS
from broker.dynamic_configs import DYNAMIC, LISTENER_PREFIX, base_name
from broker.topic_configs import TOPIC_CONFIGS

DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG = 4, 5, 8
Synonym = tuple[str, str | None, int]  # (name, value, config_source)

_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_TO_MS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000}
_KAFKA_ONLY_DEFAULTS = {"log.retention.hours": "168"}  # read-only in Kafka, not a Gregor setting
# the broker settings a topic config defaults from, first wins (Kafka 4.4 lists none for the rest)
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.type": ("compression.type",),
    "compression.zstd.level": ("compression.zstd.level",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "local.retention.ms": ("log.local.retention.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": _RETENTION,
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
}


def setting_text(value: Any) -> str:
    """A setting's value as Kafka writes it (booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Layers:
    """A broker's settings by source, each as text: what DescribeConfigs draws on."""

    per_broker: Mapping[str, str]  # DYNAMIC_BROKER_CONFIG: set for this broker (its node id)
    cluster_default: Mapping[str, str]  # DYNAMIC_DEFAULT_BROKER_CONFIG: set for every broker
    static: Mapping[str, str]  # STATIC_BROKER_CONFIG: --config / --set
    defaults: Mapping[str, str | None]  # DEFAULT_CONFIG

    @classmethod
    def of(cls, per_broker: Mapping[str, str], cluster_default: Mapping[str, str],
           static_values: Mapping[str, Any], explicit: set[str]) -> Layers:
        defaults: dict[str, str | None] = {n: d for n, (_, d) in DYNAMIC.items()}
        defaults.update((n, setting_text(spec[1])) for n, spec in SETTINGS.items())
        defaults["log.retention.ms"] = None  # stated as log.retention.hours, as Kafka does
        defaults.update(_KAFKA_ONLY_DEFAULTS)
        static = {n: setting_text(static_values[n]) for n in explicit}
        return cls(per_broker, cluster_default, static, defaults)

    def entries(self, name: str) -> list[Synonym]:
        """`name`'s value in each source that has one, the one in force first."""
        found: list[Synonym] = []
        for layer, source in ((self.per_broker, DYNAMIC_BROKER_CONFIG),
                              (self.cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self.static, STATIC_BROKER_CONFIG)):
            if name in layer:
                found.append((name, layer[name], source))
        if self.defaults.get(name) is not None:
            found.append((name, self.defaults[name], DEFAULT_CONFIG))
        return found


def broker_synonyms(layers: Layers, name: str) -> list[Synonym]:
    """A broker setting's synonyms (Kafka's brokerConfigSynonyms): log.retention.ms with its minutes
    and hours; a listener-prefixed setting with its base name; any other alone."""
    if name in _RETENTION:
        names: tuple[str, ...] = _RETENTION
    elif name.startswith(LISTENER_PREFIX) and base_name(name) != name:
        names = (name, base_name(name))
    else:
        names = (name,)
    return [entry for n in names for entry in layers.entries(n)]


def topic_config(layers: Layers, name: str, overrides: Mapping[str, str]) -> tuple[str | None, int, list[Synonym]]:
    """(value, config_source, synonyms) of a topic config: its override, else the first broker
    setting it defaults from (hours and minutes in ms), else the topic default."""
    default = TOPIC_CONFIGS[name][0]
    synonyms: list[Synonym] = []
    if name in overrides:
        synonyms.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
    for broker_name in TOPIC_SYNONYMS.get(name, ()):
        for n, value, source in layers.entries(broker_name):
            if source == DEFAULT_CONFIG and broker_name not in SETTINGS and broker_name not in _KAFKA_ONLY_DEFAULTS:
                value = default  # the topic default Gregor applies (Kafka 3.9's, where 4.4 differs)
            synonyms.append((n, value, source))
    if not synonyms:
        return default, DEFAULT_CONFIG, []
    first, value, source = synonyms[0]
    if source != DYNAMIC_TOPIC_CONFIG and first in _TO_MS and value is not None:
        value = str(int(value) * _TO_MS[first])
    return value, source, synonyms


def group_config(layers: Layers, name: str, value: str, set_here: bool,
                 own_default: str | None) -> tuple[int, list[Synonym]]:
    """(config_source, synonyms) of a group config: set for the group, then the broker setting it
    defaults from (group.<name>), or its own default when it has none there (Kafka 4.4's GroupConfig)."""
    synonyms: list[Synonym] = [(name, value, DYNAMIC_GROUP_CONFIG)] if set_here else []
    if own_default is None:
        synonyms += layers.entries("group." + name)
    else:
        synonyms.append((name, own_default, DEFAULT_CONFIG))
    return (synonyms[0][2] if synonyms else DEFAULT_CONFIG), synonyms
