"""What the console's pages show, as JSON-ready dicts read from the broker's state: the overview,
a topic, the consumer groups (Kafka UI's and RocketMQ dashboard's pages). Reads the store, the
topology and the group coordinator; never writes, never does network I/O. What reads consume
queues at length (topic_summaries, topic_partitions: the bytes a partition holds) runs in a worker
thread, as it may fault pages in from disk; the rest reads memory the event loop owns (the
coordinator's groups) and runs on the loop (routes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from broker.console.history import INTERVAL_S, LagHistory, Rates
from broker.handlers.topics import effective_configs
from broker.views.definition import view_of
from store import StoreError, TopicMeta, UnknownTopic

if TYPE_CHECKING:
    from broker.broker import Broker

SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
PAGE_ERRORS = (UnknownTopic, StoreError, KeyError)  # a partition this node's store does not hold


class NotFound(Exception):
    """A topic or group the broker does not know (HTTP 404)."""


def _offsets(broker: Broker, topic: str, partition: int) -> tuple[int | None, int | None]:
    """(log start, log end) where this node's store holds the partition (a broker group's own)."""
    try:
        return broker.store.log_start_offset(topic, partition), broker.store.high_watermark(topic, partition)
    except PAGE_ERRORS:
        return None, None


def _bytes(broker: Broker, topic: str, partition: int) -> int | None:
    try:
        return broker.store.partition_bytes(topic, partition)[0]
    except PAGE_ERRORS:
        return None


def _topics(broker: Broker) -> list[TopicMeta]:
    return sorted((m for m in broker.store.topics().values() if not m.name.startswith("__")), key=lambda m: m.name)


def topic_summary(broker: Broker, meta: TopicMeta) -> dict[str, Any]:
    view = view_of(meta)
    messages = size = 0
    if view is None:
        for p in range(meta.partitions):
            start, end = _offsets(broker, meta.name, p)
            messages += (end - start) if end is not None else 0
            size += _bytes(broker, meta.name, p) or 0
    return {"name": meta.name, "partitions": meta.partitions, "messages": messages, "bytes": size,
            "view_of": view.source if view else None}


def group_lags(broker: Broker) -> dict[str, dict[tuple[str, int], int]]:
    """Every group's lag per partition (log end minus committed offset) where this node knows both."""
    coordinator = broker.coordinator
    if coordinator is None:
        return {}
    topics = broker.store.topics()
    out: dict[str, dict[tuple[str, int], int]] = {}
    for group, _, _ in coordinator.list_groups():
        lags = out[group] = {}
        for (topic, partition), committed in coordinator.committed_all(group).items():
            view = view_of(topics.get(topic))
            _, end = _offsets(broker, view.source if view else topic, partition)
            if end is not None and committed[0] >= 0:
                lags[(topic, partition)] = max(end - committed[0], 0)
    return out


def group_summaries(broker: Broker) -> list[dict[str, Any]]:
    coordinator = broker.coordinator
    if coordinator is None:
        return []
    lags = group_lags(broker)
    out = []
    for group, protocol_type, state in sorted(coordinator.list_groups()):
        modern = coordinator.consumer_group(group)  # KIP-848's: its members are the broker's
        members = len(modern.members) if modern is not None else len(coordinator.describe(group).members)
        out.append({"name": group, "state": state, "protocol_type": protocol_type, "members": members,
                    "lag": sum(lags.get(group, {}).values())})
    for name in sorted(broker.share.known_groups()):  # KIP-932's share groups (docs/queues.md)
        shared = broker.share.describe(name)
        out.append({"name": name, "state": broker.share.group_state(name), "protocol_type": "share",
                    "members": len(shared.members) if shared is not None else 0,
                    "lag": sum(_share_lags(broker, name).values())})
    return out


def _share_lags(broker: Broker, name: str) -> dict[tuple[str, int], int]:
    """A share group's records still to deliver or acknowledge, per partition (as DescribeShareGroupOffsets)."""
    lags = {}
    for (topic, partition), part in broker.share.group_partitions(name).items():
        _, end = _offsets(broker, topic, partition)
        if end is not None:
            lags[(topic, partition)] = max(0, end - part.start - part.done())
    return lags


def _share_group(broker: Broker, name: str, history: LagHistory) -> dict[str, Any]:
    shared = broker.share.describe(name)
    members = [] if shared is None else [
        {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host, "instance_id": None,
         "member_epoch": m.epoch, "assignment": [{"topic": t, "partitions": sorted(ps)}
                                                 for t, ps in sorted(m.assignment.items())]}
        for m in shared.members.values()]
    lags = _share_lags(broker, name)
    offsets = [{"topic": t, "partition": p, "committed": part.start, "log_end_offset": _offsets(broker, t, p)[1],
                "lag": lags.get((t, p)), "member_id": None, "in_flight": part.in_flight()}
               for (t, p), part in sorted(broker.share.group_partitions(name).items())]
    return {"name": name, "state": broker.share.group_state(name), "protocol_type": "share", "protocol": "simple",
            "members": members, "offsets": offsets, "lag": sum(lags.values()),
            "lag_history": {"interval_s": INTERVAL_S, "samples": history.samples(name)}}


def topic_summaries(broker: Broker) -> list[dict[str, Any]]:
    return [topic_summary(broker, m) for m in _topics(broker)]


def overview(broker: Broker, rates: Rates, topics: list[dict[str, Any]]) -> dict[str, Any]:
    topology = broker.topology
    # a single node's address is the listener's a client came in on: here, the first listener's
    brokers = [{"id": b[0], "host": b[1] if b[1] is not None else broker.advertised_host,
                "port": b[2] if b[2] is not None else broker.advertised_port, "rack": b[3] if len(b) > 3 else None}
               for b in topology.live_brokers()]
    groups_of_brokers = topology.broker_groups()
    return {"node": {"id": broker.config["node.id"], "cluster_id": broker.cluster_id,
                     "clustered": bool(groups_of_brokers),
                     "commitlog_bytes": broker.store.commitlog_bytes()},
            "brokers": sorted(brokers, key=lambda b: b["id"]),
            "broker_groups": groups_of_brokers,
            "topics": topics,
            "groups": group_summaries(broker),
            "rates": {"interval_s": INTERVAL_S, "samples": rates.rates()}}


def topic_partitions(broker: Broker, name: str) -> list[dict[str, Any]]:
    meta = broker.topic(name)
    if meta is None:
        raise NotFound(f"unknown topic {name!r}")
    view = view_of(meta)
    source = view.source if view else name
    partitions = []
    for p in range(meta.partitions):
        leader, _, replicas, isr, _ = broker.topology.partition_view(source, p)
        start, end = _offsets(broker, source, p)
        partitions.append({"partition": p, "leader": leader, "replicas": replicas, "isr": isr,
                           "log_start_offset": start, "log_end_offset": end,
                           "bytes": None if view else _bytes(broker, name, p)})
    return partitions


def topic(broker: Broker, name: str, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    meta = broker.topic(name)
    if meta is None:
        raise NotFound(f"unknown topic {name!r}")
    view = view_of(meta)
    configs = [{"name": n, "value": v, "source": SOURCES.get(source_id, str(source_id))}
               for n, v, source_id, _ in effective_configs(broker, meta.configs)]
    return {"name": name, "view_of": view.source if view else None,
            "view_tags": [t.decode(errors="replace") for t in view.tags] if view else [],
            "partitions": partitions, "configs": configs}


def group(broker: Broker, name: str, history: LagHistory) -> dict[str, Any]:
    coordinator = broker.coordinator
    known = {g for g, _, _ in coordinator.list_groups()} if coordinator is not None else set()
    if name not in known and name in broker.share.known_groups():
        return _share_group(broker, name, history)  # a share group: its start offsets stand for commits
    if name not in known:
        raise NotFound(f"unknown group {name!r} (or not coordinated by node {broker.config['node.id']})")
    summary = coordinator.describe(name)
    members, owner = [], {}
    consumer_group = coordinator.consumer_group(name)  # KIP-848's: the broker holds the assignment
    listed = ([(m.member_id, m.client_id, m.client_host, m.instance_id, m.assignment.epoch,
                sorted((t, sorted(ps)) for t, ps in m.assignment.assigned.items()))
               for m in consumer_group.members.values()] if consumer_group is not None else
              [(m.member_id, m.client_id, m.client_host, m.instance_id, None, _assignment(m.assignment))
               for m in summary.members])
    for member_id, client_id, client_host, instance_id, epoch, assigned in listed:
        members.append({"member_id": member_id, "client_id": client_id, "client_host": client_host,
                        "instance_id": instance_id, "member_epoch": epoch,
                        "assignment": [{"topic": t, "partitions": ps} for t, ps in assigned]})
        owner.update({(t, p): member_id for t, ps in assigned for p in ps})
    lags = group_lags(broker).get(name, {})
    offsets = []
    for (t, p), committed in sorted(coordinator.committed_all(name).items()):
        meta = broker.topic(t)
        view = view_of(meta)
        _, end = _offsets(broker, view.source if view else t, p)
        offsets.append({"topic": t, "partition": p, "committed": committed[0], "log_end_offset": end,
                        "lag": lags.get((t, p)), "member_id": owner.get((t, p))})
    return {"name": name, "state": summary.state, "protocol_type": summary.protocol_type,
            "protocol": summary.protocol_data, "members": members, "offsets": offsets,
            "lag": sum(lags.values()),
            "lag_history": {"interval_s": INTERVAL_S, "samples": history.samples(name)}}


def _assignment(data: bytes) -> list[tuple[str, list[int]]]:
    """A consumer-protocol member assignment (topic, partitions); [] for other protocols or none."""
    if not data:
        return []
    try:
        decoded = ConsumerProtocolAssignment.decode(data)
        return [(a.topic, sorted(a.partitions)) for a in decoded.assigned_partitions]
    except Exception:  # a protocol other than "consumer" (Connect's, Streams' own) or bytes it cannot read
        return []

