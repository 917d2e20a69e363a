"""Configs of a BROKER resource: AlterConfigs and IncrementalAlterConfigs of dynamic broker settings
for one broker (its node id) or for all (an empty name), and what DescribeConfigs lists for it
(Kafka's ConfigAdminManager and ConfigHelper for brokers). Which settings are dynamic and how a
value is checked: broker/dynamic_configs.py; a TLS listener's files: broker/security/dynamic_tls.py.
A change is kept as Kafka keeps it only once every check passed; validate_only changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from broker.config import SENSITIVE_SETTINGS, SETTINGS
from broker.config_sources import DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, broker_synonyms, setting_text
from broker.dynamic_configs import DEFAULT_NODE, DYNAMIC, NOT_APPLIED, change_problem, config_type
from broker.security import dynamic_tls
from broker.topic_configs import BOOLEAN, LIST, LONG, PASSWORD, STRING
from protocol.errors import ErrorCode
from store import StoreError
from store.partition import cleanup_policy

if TYPE_CHECKING:
    from broker.broker import Broker

SET, DELETE, APPEND, SUBTRACT = range(4)  # IncrementalAlterConfigs operations (KIP-339)
Problem = tuple[ErrorCode, str | None]
Entry = tuple[str, str | None, bool, int, bool, int, list[tuple[str, str | None, int]], str]
KAFKA_ONLY_DOC = "Kafka 4.4's dynamic broker setting: kept and described; no effect in Gregor"
_GREGOR_TYPES = {bool: BOOLEAN, int: LONG, str: STRING}


def _changes(broker: Broker, level: dict[str, str], configs, incremental: bool) -> tuple[dict, Problem | None]:
    """The settings a request changes at its level (None: deleted), or Kafka's answer to it."""
    changes: dict[str, str | None] = {}
    if not incremental:  # AlterConfigs replaces the level's whole set
        changes = {name: None for name in level}
    for c in configs:
        operation = c.config_operation if incremental else SET
        if operation == SET:
            if c.value is None:
                return {}, (ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}")
            changes[c.name] = c.value
        elif operation == DELETE:
            changes[c.name] = None
        elif operation in (APPEND, SUBTRACT):
            verb = "append" if operation == APPEND else "subtract"
            if dynamic_tls.split(c.name) is not None or config_type(c.name) != LIST:
                return {}, (ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {c.name}")
            now = changes.get(c.name, level.get(c.name, broker.settings.current().get(c.name)))
            items = [v for v in (now or "").split(",") if v]
            change = [v for v in (c.value or "").split(",") if v]
            items = items + [v for v in change if v not in items] if operation == APPEND else \
                [v for v in items if v not in change]
            changes[c.name] = ",".join(items)
        else:
            return {}, (ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation}")
    return changes, None


def _gregor_problem(broker: Broker, changes: dict[str, str | None]) -> str | None:
    """Gregor's reason to refuse a value Kafka would take: what its commitlog cannot honour."""
    if changes.get("message.max.bytes") is not None:
        size, segment = int(changes["message.max.bytes"]), broker.config["commitlog.segment.bytes"]
        if size + 256 > segment:
            return (f"message.max.bytes={size} would not fit one of Gregor's commitlog segments "
                    f"(commitlog.segment.bytes={segment}, set at start)")
    if changes.get("log.cleaner.backoff.ms") is not None and int(changes["log.cleaner.backoff.ms"]) <= 0:
        return "log.cleaner.backoff.ms must be positive in Gregor: it is the log cleaner's sleep between runs"
    cap_text = changes.get("log.retention.bytes")
    if cap_text is not None and int(cap_text) >= 0:
        cap = int(cap_text)
        for name, meta in sorted(broker.store.topics().items()):
            if not cleanup_policy(meta.configs)[1]:
                return (f"log.retention.bytes={cap} caps Gregor's one commitlog, shared by every topic, which "
                        f"cannot keep the latest record of every key of topic '{name}' (cleanup.policy="
                        f"{meta.configs['cleanup.policy']}) for good")
            own = meta.configs.get("retention.bytes")
            if own is not None and not 0 <= int(own) <= cap:
                return (f"log.retention.bytes={cap} caps Gregor's one commitlog, shared by every topic: topic "
                        f"'{name}' has retention.bytes={own}, more than that")
    return None


async def _tls_problem(broker: Broker, proposed: dict[str, str], changed: set[str]) -> Problem | None:
    """A TLS listener's new files checked as Kafka checks them (broker/security/dynamic_tls.py)."""
    known = broker.tls_listener_names()
    for listener in sorted({dynamic_tls.split(n)[0] for n in changed if dynamic_tls.split(n)}):
        if listener not in known:
            return ErrorCode.INVALID_REQUEST, (f"{listener} is not a TLS listener of broker {broker.node_id} "
                                               f"(its TLS listeners: {', '.join(sorted(known)) or 'none'})")
        settings = dynamic_tls.effective(broker.settings.static_values, proposed, listener)
        problem = await trio.to_thread.run_sync(
            dynamic_tls.change_problem, broker.served_certificates.get(listener, {}), settings,
            broker.config["ssl.allow.dn.changes"], broker.config["ssl.allow.san.changes"])
        if problem:
            return ErrorCode.INVALID_REQUEST, problem
    return None


async def alter_broker(broker: Broker, name: str, configs, incremental: bool, validate_only: bool) -> Problem:
    """AlterConfigs or IncrementalAlterConfigs of one BROKER resource."""
    if name and not name.lstrip("-").isdigit():
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
    if name and int(name) != broker.node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, but received {name}"
    broker.refresh_dynamic()
    node = broker.node_id if name else DEFAULT_NODE
    level = broker.settings.per_broker if name else broker.settings.cluster_default
    changes, problem = _changes(broker, level, configs, incremental)
    if problem:
        return problem
    problem = change_problem(changes, bool(name), broker.settings.current())
    if problem:
        return problem
    why = _gregor_problem(broker, changes)
    if why:
        return ErrorCode.INVALID_CONFIG, why
    new = {k: v for k, v in {**level, **changes}.items() if v is not None}
    changed = {n for n in set(level) | set(new) if level.get(n) != new.get(n)}
    tls_names = {n for n in changes if dynamic_tls.split(n)}
    problem = await _tls_problem(broker, new, tls_names) if tls_names else None
    if problem or validate_only:
        return problem or (ErrorCode.NONE, None)
    records = [(dynamic_tls.state_key(node, n), None if n not in new else new[n].encode()) for n in sorted(changed)]
    if records:
        try:
            await broker.write_security(records)  # in a cluster through ZooKeeper, as ACLs (cluster_security.py)
        except StoreError as exc:
            return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    broker.refresh_dynamic()
    for listener in sorted({dynamic_tls.split(n)[0] for n in tls_names}):
        broker.apply_tls(listener)
    return ErrorCode.NONE, None


def _sensitive(name: str) -> bool:
    return name in SENSITIVE_SETTINGS or config_type(name) == PASSWORD or name.endswith(".ssl.key.password")


def _entry(broker: Broker, name: str, with_synonyms: bool) -> Entry:
    layers = broker.settings.layers()
    synonyms = broker_synonyms(layers, name)
    sensitive = _sensitive(name)
    if name in SETTINGS:
        value: Any = setting_text(broker.config[name])
        kind = DYNAMIC[name][0] if name in DYNAMIC else _GREGOR_TYPES.get(type(broker.config[name]), STRING)
    else:
        value = next((v for n, v, _ in synonyms if n == name), None)
        kind = config_type(name)
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    read_only = (name not in DYNAMIC and dynamic_tls.split(name) is None) or name in NOT_APPLIED
    shown = [(n, None if sensitive else v, s) for n, v, s in synonyms] if with_synonyms else []
    return (name, None if sensitive else value, read_only, source, sensitive,
            PASSWORD if sensitive else kind, shown, _documentation(name))


def _documentation(name: str) -> str:
    """What the setting does in Gregor (DescribeConfigs v3+, include_documentation)."""
    if name in SETTINGS:
        return SETTINGS[name][2]
    tls = dynamic_tls.split(name)
    if tls is not None:
        return f"the {tls[1]} of listener {tls[0]}, changed at run time (broker/security/dynamic_tls.py)"
    return KAFKA_ONLY_DOC


def describe_broker(broker: Broker, name: str, keys: set[str] | None, with_synonyms: bool) -> list[Entry]:
    """DescribeConfigs of this broker (its node id: every setting it has or Kafka takes dynamically)
    or of the cluster-wide default (an empty name: the dynamic defaults set)."""
    broker.refresh_dynamic()
    if not name:
        return [(n, None if _sensitive(n) else v, False, DYNAMIC_DEFAULT_BROKER_CONFIG, _sensitive(n),
                 config_type(n), [(n, None if _sensitive(n) else v, DYNAMIC_DEFAULT_BROKER_CONFIG)]
                 if with_synonyms else [], _documentation(n))
                for n, v in sorted(broker.settings.cluster_default.items()) if keys is None or n in keys]
    names = set(SETTINGS) | set(DYNAMIC) | set(broker.settings.per_broker)
    return [_entry(broker, n, with_synonyms) for n in sorted(names) if keys is None or n in keys]
