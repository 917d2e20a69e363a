"""DescribeConfigs (32): a topic's configs, a broker's settings and a group's configs, each with its
source and, when asked (include_synonyms, v1+), its synonyms in Kafka 4.4's order (Kafka's
ConfigHelper.describeConfigs; broker/config_sources.py) and, when asked (include_documentation, v3+),
what it does in Gregor (a group config's: null)."""

from __future__ import annotations

from broker.broker import Broker
from broker.config_sources import group_config
from broker.groups.share_coordinator import GROUP_CONFIGS
from broker.handlers.broker_configs import describe_broker
from broker.handlers.group_configs import GROUP_RESOURCE, describe_group
from broker.handlers.topics import BROKER_RESOURCE, TOPIC_RESOURCE, topic_entries
from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.topic_configs import BOOLEAN, INT, STRING, TOPIC_CONFIG_DOCS
from protocol.codec import Request
from protocol.errors import ErrorCode

TOPIC_REFUSED_MESSAGE = "Topic authorization failed."  # Kafka's Errors messages
CLUSTER_REFUSED_MESSAGE = "Cluster authorization failed."


def _group_type(name: str, value: str) -> int:
    """A group config's config_type as Kafka 4.4 reports it."""
    if name.endswith(".enable"):
        return BOOLEAN
    return INT if value.lstrip("-").isdigit() and name.endswith((".ms", ".limit")) else STRING


async def handle_describe_configs(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    Result = cls.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    Synonym = Entry.DescribeConfigsSynonym
    with_synonyms = bool(body.include_synonyms)
    with_docs = bool(getattr(body, "include_documentation", False))
    results = []
    for res in body.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        entries, error, message = [], ErrorCode.NONE, ""
        if res.resource_type == TOPIC_RESOURCE and not broker.allowed(Op.DESCRIBE_CONFIGS, Res.TOPIC,
                                                                      res.resource_name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, TOPIC_REFUSED_MESSAGE
        elif res.resource_type == BROKER_RESOURCE and not broker.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER,
                                                                         CLUSTER_NAME):
            error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED_MESSAGE
        elif res.resource_type == TOPIC_RESOURCE:
            meta = broker.topic(res.resource_name)
            if meta is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                broker.refresh_dynamic()
                for name, value, source, kind, synonyms in topic_entries(broker, meta.configs):
                    if keys is None or name in keys:
                        entries.append(Entry(
                            name=name, value=value, read_only=False, config_source=source, is_sensitive=False,
                            synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in synonyms]
                            if with_synonyms else [], config_type=kind,
                            documentation=TOPIC_CONFIG_DOCS[name] if with_docs else None))
        elif res.resource_type == BROKER_RESOURCE:
            name = res.resource_name
            if name and not name.lstrip("-").isdigit():
                error, message = ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            elif name and int(name) != broker.node_id:
                error, message = (ErrorCode.INVALID_REQUEST,
                                  (f"Unexpected broker id, expected {broker.node_id} or empty string, "
                                  f"but received {name}"))
            else:
                for n, value, read_only, source, sensitive, kind, synonyms, doc in describe_broker(
                        broker, name, keys, with_synonyms):
                    entries.append(Entry(name=n, value=value, read_only=read_only, config_source=source,
                                         is_sensitive=sensitive,
                                         synonyms=[Synonym(name=sn, value=sv, source=ss) for sn, sv, ss in synonyms],
                                         config_type=kind, documentation=doc if with_docs else None))
        elif res.resource_type == GROUP_RESOURCE:
            if not broker.allowed(Op.DESCRIBE_CONFIGS, Res.GROUP, res.resource_name):
                error, message = ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
            else:
                broker.refresh_dynamic()
                layers = broker.settings.layers()
                for name, value, here in describe_group(broker, res.resource_name, keys):
                    source, synonyms = group_config(layers, name, value, here, GROUP_CONFIGS[name])
                    entries.append(Entry(name=name, value=value, read_only=False, config_source=source,
                                         is_sensitive=False,
                                         synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in synonyms]
                                         if with_synonyms else [],
                                         config_type=_group_type(name, value), documentation=None))
        else:
            error, message = ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        results.append(Result(error_code=error, error_message=message, resource_type=res.resource_type,
                              resource_name=res.resource_name, configs=entries))
    return cls[version](throttle_time_ms=0, results=results)
