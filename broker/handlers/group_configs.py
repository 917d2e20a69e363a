"""Configs of a GROUP resource (resource type 32, KIP-848's and KIP-932's group configs): what
IncrementalAlterConfigs sets and DescribeConfigs shows for one group id (Kafka's GroupConfig and
GroupConfigManager). The share groups' settings are kept by broker/groups/share_coordinator.py,
durably; a setting Gregor does not apply yet is refused with INVALID_CONFIG, never kept unused."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.groups.dead_letters import name_problem
from broker.groups.share_coordinator import GROUP_CONFIGS, release_delays, reset_duration_ms
from protocol.errors import ErrorCode
from store import StoreError

if TYPE_CHECKING:
    from broker.broker import Broker

GROUP_RESOURCE = 32
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations; APPEND and SUBTRACT are for lists
KNOWN_ELSEWHERE = ("consumer.assignment.interval.ms", "share.assignment.interval.ms",
                   "share.assignor.offload.enable", "share.renew.acknowledge.enable")


def _problem(broker: Broker, name: str, value: str | None) -> str | None:
    """Kafka's message for a value it refuses (or Gregor's for a setting it does not apply)."""
    if name in KNOWN_ELSEWHERE:
        return f"gregor: the group config {name} is not supported yet"
    if name not in GROUP_CONFIGS:
        return f"Unknown group config name: {name}"
    if value is None:
        return None
    config = broker.config
    if name == "errors.deadletterqueue.topic.name":
        problem = name_problem(value)
        return f"{name}: {problem}" if problem else None
    if name == "gregor.share.release.delay.ms":
        try:
            release_delays(value)
        except ValueError:
            return (f"Invalid value {value} for configuration {name}: comma-separated delays in ms, each at "
                    "least 0 (the n-th for a record released after its n-th delivery)")
        return None
    if name == "errors.deadletterqueue.copy.record.enable":
        if value.lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
        return None
    if name == "share.auto.offset.reset":
        try:
            reset_duration_ms(value)
        except ValueError:
            return (f"Invalid value {value} for configuration {name}: Invalid value `{value}` for configuration "
                    f"{name}. The value must be either 'earliest', 'latest' or of the format "
                    "'by_duration:<PnDTnHnMn.nS>'.")
    elif name == "share.isolation.level":
        if value not in ("read_committed", "read_uncommitted"):
            return (f"Invalid value {value} for configuration share.isolation.level: "
                    "String must be one of: read_committed, read_uncommitted")
    else:
        try:
            number = int(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        # Kafka 4.4 bounds these by the broker's min/max settings, with its message
        low, high = {"share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                                       "group.share.max.record.lock.duration.ms"),
                     "share.delivery.count.limit": ("group.share.min.delivery.count.limit",
                                                    "group.share.max.delivery.count.limit"),
                     "share.session.timeout.ms": ("group.share.min.session.timeout.ms",
                                                  "group.share.max.session.timeout.ms"),
                     "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms",
                                                     "group.share.max.heartbeat.interval.ms"),
                     "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms",
                                                     "group.consumer.max.session.timeout.ms"),
                     "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                                        "group.consumer.max.heartbeat.interval.ms")}[name]
        if not config[low] <= number <= config[high]:
            return f"{name} must be in the range {config[low]} to {config[high]} inclusive."
    return None


async def alter_group(broker: Broker, group: str, configs, validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on one GROUP resource."""
    changes: dict[str, str | None] = {}
    for c in configs:
        if c.config_operation not in (SET, DELETE):
            return ErrorCode.INVALID_CONFIG, f"Config {c.name} is not a list: only SET and DELETE apply"
        value = c.value if c.config_operation == SET else None
        problem = _problem(broker, c.name, value)
        if problem:
            return ErrorCode.INVALID_CONFIG, problem
        changes[c.name] = value
    if validate_only or not changes:
        return ErrorCode.NONE, None
    try:
        await broker.share.set_configs(group, changes)
    except StoreError as exc:
        return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    return ErrorCode.NONE, None


def describe_group(broker: Broker, group: str, keys: set[str] | None) -> list[tuple[str, str, bool]]:
    """(name, value, set for this group) of every group config Gregor applies."""
    set_here = broker.share.configs_of(group)
    return [(name, broker.share.config(group, name), name in set_here)
            for name in sorted(GROUP_CONFIGS) if keys is None or name in keys]
