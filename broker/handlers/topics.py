"""Topic administration: CreateTopics, DeleteTopics and CreatePartitions, with Kafka's validation
order and messages, and a topic's configs as CreateTopics and DescribeConfigs list them."""

from __future__ import annotations

import uuid

from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.broker import Broker, topic_name_error
from broker.config_sources import topic_config
from broker.handlers.configs import topic_config_problem
from broker.topic_configs import GREGOR_TOPIC_CONFIGS, TOPIC_CONFIGS
from broker.views.definition import is_view_config, view_config_error, view_of, views_of
from protocol.codec import Request
from protocol.errors import ErrorCode
from store import StoreError, TopicExists, UnknownTopic

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
GREGOR_ONLY = {name for name, _, _ in GREGOR_TOPIC_CONFIGS}


def topic_entries(broker: Broker, overrides: dict[str, str]) -> list[tuple[str, str | None, int, int, list]]:
    """(name, value, config_source, config_type, synonyms) of every topic config, sorted by name
    (broker/config_sources.py: the override, else the broker setting it defaults from)."""
    layers = broker.settings.layers()
    out = []
    for name, (_, kind) in sorted(TOPIC_CONFIGS.items()):
        if name in GREGOR_ONLY and name not in overrides:
            continue  # listed only when set, so a plain topic describes exactly as on Kafka
        value, source, synonyms = topic_config(layers, name, overrides)
        out.append((name, value, source, kind, synonyms))
    return out


def effective_configs(broker: Broker, overrides: dict[str, str]) -> list[tuple[str, str | None, int, int]]:
    """(name, value, config_source, config_type) for every topic config, sorted by name."""
    return [entry[:4] for entry in topic_entries(broker, overrides)]


async def handle_create_topics(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    counts: dict[str, int] = {}
    for t in body.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results = []
    cluster_create = broker.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME)
    for t in body.topics:
        error, message, partitions = _validate_create(broker, t, counts[t.name] > 1)
        if (error != ErrorCode.INVALID_REQUEST and not cluster_create
                and not broker.allowed(Op.CREATE, Res.TOPIC, t.name)):
            error, message, partitions = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", -1
        topic_id, configs = None, []
        config_error = 0
        if error == ErrorCode.NONE:
            overrides = {c.name: c.value for c in t.configs}
            if body.validate_only:
                topic_id = uuid.uuid4()  # Kafka returns a would-be topic id for a validated topic
            else:
                try:
                    meta = await broker.create_topic(t.name, partitions, overrides)
                    topic_id = meta.topic_id
                except TopicExists:
                    error, message = ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
                except StoreError as exc:  # out of open files or space, an offline log dir
                    error, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
            if error == ErrorCode.NONE and not broker.allowed(Op.DESCRIBE_CONFIGS, Res.TOPIC, t.name):
                config_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # Kafka hides the configs then
            elif error == ErrorCode.NONE:
                configs = [cls.CreatableTopicResult.CreatableTopicConfigs(
                    name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                    for name, value, source, _ in effective_configs(broker, overrides)]
        ok = error == ErrorCode.NONE
        results.append(cls.CreatableTopicResult(
            name=t.name, topic_id=topic_id, error_code=error, error_message=message,
            topic_config_error_code=config_error, num_partitions=partitions if ok else -1,
            replication_factor=group_size(broker) if ok else -1, configs=configs))
    if not body.validate_only and any(r.error_code == ErrorCode.NONE for r in results):
        await broker.replicated()  # in a broker group: the topics exist on the sync-state set when answered
    # Kafka answers a duplicated name once.
    seen, unique = set(), []
    for r in results:
        if r.name not in seen:
            seen.add(r.name)
            unique.append(r)
    return cls[version](throttle_time_ms=0, topics=unique)


def group_size(broker: Broker) -> int:
    """Every partition's replicas: the nodes of the broker group (1 on a single broker)."""
    return broker.topology.replicas()


def _validate_create(broker: Broker, t, duplicate: bool) -> tuple[ErrorCode, str | None, int]:
    if duplicate:
        return ErrorCode.INVALID_REQUEST, "Duplicate topic name.", -1
    problem = topic_name_error(t.name)
    if problem:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, problem, -1
    if broker.topic(t.name) is not None:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.", -1
    partitions = broker.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
    if t.assignments:
        partitions = len(t.assignments)
    if partitions <= 0:
        return ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.", -1
    rf = t.replication_factor
    if rf == 0 or rf < -1:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.", -1)
    size = group_size(broker)
    if rf > size > 1:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                (f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                f"cannot be reached because only {size} broker(s) are registered."), -1)
    if rf not in (-1, size) and size > 1:  # a group replicates its whole commitlog on every node (docs/replication.md)
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                (f"Replication factor {rf} does not match broker group {broker.config['broker.group']}: its "
                 f"{size} nodes each hold every partition of the group, so a topic's replication factor is {size} "
                 "(or -1)"), -1)
    if rf > 1 and size == 1:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                (f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                "cannot be reached because only 1 broker(s) are registered."), -1)
    configs = {c.name: c.value for c in t.configs}
    problem = topic_config_problem(broker, configs)
    if problem:
        return ErrorCode.INVALID_CONFIG, problem, -1
    if is_view_config(configs):
        topics = broker.store.topics()
        problem = view_config_error(t.name, configs, topics)
        if problem:
            return ErrorCode.INVALID_CONFIG, problem, -1
        mirrored = topics[configs["view.source"]].partitions
        if t.num_partitions not in (-1, mirrored) or (t.assignments and len(t.assignments) != mirrored):
            return (ErrorCode.INVALID_PARTITIONS,
                    f"A view has its source's {mirrored} partitions; ask for -1 or {mirrored}.", -1)
        partitions = mirrored
    return ErrorCode.NONE, None, partitions


async def handle_delete_topics(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    cascaded: dict[str, object] = {}  # views deleted with their source in this request
    cluster_delete = broker.allowed(Op.DELETE, Res.CLUSTER, CLUSTER_NAME)
    for name, topic_id in wanted:
        by_id = name is None and topic_id is not None
        if by_id:
            name = next((m.name for m in broker.store.topics().values() if m.topic_id == topic_id), None)
            if name is None:
                results.append(cls.DeletableTopicResult(name=None, topic_id=topic_id,
                                                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                                        error_message="This server does not host this topic ID."))
                continue
        if not cluster_delete and not broker.allowed(Op.DELETE, Res.TOPIC, name):
            # Kafka names a topic asked for by id only to a client that may Describe it
            shown = name if not by_id or broker.allowed(Op.DESCRIBE, Res.TOPIC, name) else None
            results.append(cls.DeletableTopicResult(name=shown, topic_id=topic_id if by_id else None,
                                                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                    error_message=None))
            continue
        meta = broker.topic(name)
        if meta is None and name in cascaded:
            results.append(cls.DeletableTopicResult(name=name, topic_id=cascaded[name], error_code=ErrorCode.NONE,
                                                    error_message=None))
            continue
        if meta is None:
            results.append(cls.DeletableTopicResult(name=name, topic_id=topic_id,
                                                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                    error_message="This server does not host this topic-partition."))
            continue
        try:
            for view in views_of(broker.store.topics(), name):  # a source takes its views with it
                cascaded[view] = broker.topic(view).topic_id
                await broker.delete_topic(view)
            await broker.delete_topic(name)
            broker.producers.forget_topic(name)
            error, message = ErrorCode.NONE, None
        except UnknownTopic:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        except StoreError as exc:  # its tombstone was refused: full disk, offline log dir
            error, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        results.append(cls.DeletableTopicResult(name=name, topic_id=meta.topic_id, error_code=error,
                                                error_message=message))
    if any(r.error_code == ErrorCode.NONE for r in results):
        await broker.replicated()  # in a broker group: the deletes are on the sync-state set when answered
    return cls[version](throttle_time_ms=0, responses=results)


async def handle_create_partitions(broker: Broker, request: Request):
    body = request.body
    cls = request.spec.response
    results = []
    for t in body.topics:
        meta = broker.topic(t.name)
        error, message = ErrorCode.NONE, None
        if not broker.allowed(Op.ALTER, Res.TOPIC, t.name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
        elif meta is None:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist."
        elif view_of(meta) is not None:
            error = ErrorCode.INVALID_REQUEST
            message = f"'{t.name}' is a view: it has its source's partitions; add them to '{view_of(meta).source}'."

        elif t.count < meta.partitions:
            error, message = (ErrorCode.INVALID_PARTITIONS,
                              (f"Topic currently has {meta.partitions} partitions, which is higher than the "
                              f"requested {t.count}."))
        elif t.count == meta.partitions:
            error, message = ErrorCode.INVALID_PARTITIONS, f"Topic already has {meta.partitions} partitions."
        elif not body.validate_only:
            try:
                await broker.add_partitions(t.name, t.count)
                for view in views_of(broker.store.topics(), t.name):
                    await broker.add_partitions(view, t.count)
            except UnknownTopic:  # deleted by another client meanwhile
                error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist."
            except StoreError as exc:  # out of open files or space, an offline log dir
                error, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        results.append(cls.CreatePartitionsTopicResult(name=t.name, error_code=error, error_message=message))
    if not body.validate_only and any(r.error_code == ErrorCode.NONE for r in results):
        await broker.replicated()  # in a broker group: the new partitions are on the sync-state set when answered
    return cls[request.header.api_version](throttle_time_ms=0, results=results)


__all__ = [
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_topics",
]
