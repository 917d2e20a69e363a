"""AlterConfigs, IncrementalAlterConfigs and DeleteRecords, and the topic-config rules that
CreateTopics shares with them: a config Gregor cannot honour is refused with INVALID_CONFIG,
never accepted and ignored."""

from __future__ import annotations

import trio

from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.broker import Broker
from broker.handlers.broker_configs import alter_broker
from broker.handlers.group_configs import GROUP_RESOURCE, alter_group
from broker.topic_configs import LIST, TOPIC_CONFIGS, config_error
from broker.views.definition import view_of
from protocol.codec import Request
from protocol.errors import ErrorCode
from store import OffsetOutOfRange, StoreError, UnknownPartition, UnknownTopic

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE, APPEND, SUBTRACT = range(4)  # IncrementalAlterConfigs operations (KIP-339)
FIXED_AT_CREATION = ("tag.header", "view.source", "view.tags")  # what derived data was built with


def topic_config_problem(broker: Broker, configs: dict[str, str | None]) -> str | None:
    """Kafka's message for a bad topic config, or Gregor's for one it cannot honour; None if all
    are acceptable."""
    for name, value in configs.items():
        problem = config_error(name, value)
        if problem:
            return problem
    policy = configs.get("cleanup.policy")
    if policy is not None:
        values = [v.strip().lower() for v in policy.split(",") if v.strip()]
        if not values or any(v not in ("compact", "delete") for v in values):
            return f"Invalid value {policy} for configuration cleanup.policy: String must be one of: compact, delete"
        cap = broker.config["log.retention.bytes"]
        if "delete" not in values and cap >= 0:
            return (f"cleanup.policy={policy} keeps the latest record of every key for good, which the broker's "
                    f"log.retention.bytes={cap} (a cap on Gregor's one commitlog, shared by every topic) cannot "
                    "promise: use compact,delete, or unset log.retention.bytes")
    if configs.get("retention.ms") is not None and int(configs["retention.ms"]) < -1:
        return f"Invalid value {configs['retention.ms']} for configuration retention.ms: Value must be at least -1"
    if configs.get("retention.bytes") is not None:
        # log.retention.bytes caps the one shared commitlog (every topic together): no topic can
        # be promised more than that
        value, cap = int(configs["retention.bytes"]), broker.config["log.retention.bytes"]
        if cap >= 0 and (value < 0 or value > cap):
            return (f"retention.bytes={value} asks for more than the broker's log.retention.bytes={cap}, "
                    "which caps Gregor's one commitlog shared by every topic; set retention.bytes at most "
                    f"{cap}, or raise log.retention.bytes")
    return None


def _altered(current: dict[str, str], configs, incremental: bool) -> tuple[dict[str, str] | None, str | None]:
    """The topic's new overrides, or Kafka's message for a refused operation."""
    if not incremental:  # AlterConfigs replaces the whole set of overrides
        new = {}
        for c in configs:
            if c.value is None:
                return None, f"Null value not supported for topic configs: {c.name}"
            new[c.name] = c.value
        return new, None
    new = dict(current)
    for c in configs:
        if c.name not in TOPIC_CONFIGS:
            return None, f"Unknown topic config name: {c.name}"
        if c.config_operation == SET:
            new[c.name] = c.value
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            if TOPIC_CONFIGS[c.name][1] != LIST:
                verb = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
                return None, f"Can't {verb} to key {c.name} because its type is not LIST."
            default = TOPIC_CONFIGS[c.name][0] or ""
            items = [v for v in new.get(c.name, default).split(",") if v]
            change = [v for v in (c.value or "").split(",") if v]
            if c.config_operation == APPEND:
                items += [v for v in change if v not in items]
            else:
                items = [v for v in items if v not in change]
            new[c.name] = ",".join(items)
        else:
            return None, f"Unknown config operation {c.config_operation}"
    return new, None


async def _alter_topic(broker: Broker, name: str, configs, incremental: bool,
                       validate_only: bool) -> tuple[ErrorCode, str | None]:
    meta = broker.topic(name)
    if meta is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if view_of(meta) is not None:
        return ErrorCode.INVALID_CONFIG, f"'{name}' is a view: its configs are fixed at creation"
    new, problem = _altered(meta.configs, configs, incremental)
    if problem is None:
        fixed = [k for k in FIXED_AT_CREATION if new.get(k) != meta.configs.get(k)]
        if fixed:
            problem = f"{fixed[0]} is fixed when a topic is created (its derived data was built with it)"
        else:
            problem = topic_config_problem(broker, {k: v for k, v in new.items() if meta.configs.get(k) != v})
    if problem is not None:
        return ErrorCode.INVALID_CONFIG, problem
    if not validate_only:
        try:
            await broker.alter_topic_configs(name, new)  # rewrites topic metadata
            await broker.replicated()  # in a broker group: on the sync-state set when answered
        except UnknownTopic:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        except StoreError as exc:  # the topic's record was refused: full disk, offline log dir
            return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    return ErrorCode.NONE, None


async def handle_alter_configs(broker: Broker, request: Request):
    """AlterConfigs (33) and IncrementalAlterConfigs (44): topic configs take effect at once; a
    broker's dynamic settings: broker/handlers/broker_configs.py; a group's: group_configs.py."""
    body = request.body
    cls = request.spec.response
    incremental = request.header.api_key == 44
    results = []
    for res in body.resources:
        if res.resource_type == TOPIC_RESOURCE and not broker.allowed(Op.ALTER_CONFIGS, Res.TOPIC, res.resource_name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        elif res.resource_type == BROKER_RESOURCE and not broker.allowed(Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
            error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        elif res.resource_type == TOPIC_RESOURCE:
            error, message = await _alter_topic(broker, res.resource_name, res.configs, incremental,
                                                body.validate_only)
        elif res.resource_type == GROUP_RESOURCE and not incremental:
            error, message = ErrorCode.INVALID_REQUEST, "AlterConfigs does not take group configs: use IncrementalAlterConfigs"
        elif res.resource_type == GROUP_RESOURCE and not broker.allowed(Op.ALTER_CONFIGS, Res.GROUP, res.resource_name):
            error, message = ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
        elif res.resource_type == GROUP_RESOURCE:
            error, message = await alter_group(broker, res.resource_name, res.configs, body.validate_only)
        elif res.resource_type == BROKER_RESOURCE:
            error, message = await alter_broker(broker, res.resource_name, res.configs, incremental,
                                                body.validate_only)
        else:
            error, message = ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        results.append(cls.AlterConfigsResourceResponse(error_code=error, error_message=message,
                                                        resource_type=res.resource_type,
                                                        resource_name=res.resource_name))
    return cls[request.header.api_version](throttle_time_ms=0, responses=results)


async def handle_delete_records(broker: Broker, request: Request):
    """DeleteRecords (21): move each partition's log start offset (-1: to the high watermark);
    the answer's low watermark is the new log start."""
    cls = request.spec.response
    topics = []
    for t in request.body.topics:
        meta = broker.topic(t.name)
        refused = not broker.allowed(Op.DELETE, Res.TOPIC, t.name)
        parts = []
        for p in t.partitions:
            low, error = -1, ErrorCode.NONE
            if refused:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not broker.topology.takes_writes(t.name, p.partition_index):
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # a follower, another broker group's, or a clean stop
            elif view_of(meta) is not None:
                error = ErrorCode.INVALID_REQUEST  # a view has its source's log start
            elif p.offset < -1:
                error = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                try:
                    low = await trio.to_thread.run_sync(broker.store.delete_records, t.name, p.partition_index,
                                                        p.offset)  # a checkpoint: disk work
                except OffsetOutOfRange:
                    error = ErrorCode.OFFSET_OUT_OF_RANGE
                except (UnknownTopic, UnknownPartition):
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts.append(cls.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=low, error_code=error))
        topics.append(cls.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return cls[request.header.api_version](throttle_time_ms=0, topics=topics)
