"""The console's actions: reset a group's offsets, delete a topic, create a view. Each goes through
the Kafka handler a client's request would reach (OffsetCommit, DeleteTopics, CreateTopics), built
with kafka-python's request classes and run as the principal `admin.principal` from the HTTP
client's address, so ACLs, views' cascades and a cluster's coordinator and controller rules apply
exactly as to any client (Kafka's kafka-consumer-groups and kafka-topics tools do the same)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest

from broker.cli.format import UsageError, parse_time_ms
from broker.console.pages import NotFound
from broker.handlers import dispatch
from broker.net import peer
from broker.views.definition import view_of
from protocol.codec import decode_request
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.broker import Broker

TIMEOUT_MS = 30000
INACTIVE = ("Empty", "Dead")  # states in which a group's offsets may be reset (Kafka's tool: "inactive")


class Refused(Exception):
    """An action the broker refused: HTTP `status` with Kafka's reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@contextmanager
def _as_console(broker: Broker, client_ip: str):
    """Handlers judge the request as admin.principal's from the HTTP client's address."""
    tokens = (peer.acting.set(broker.config["admin.principal"]), peer.peer_host.set("/" + client_ip))
    try:
        yield
    finally:
        peer.peer_host.reset(tokens[1])
        peer.acting.reset(tokens[0])


async def _call(broker: Broker, client_ip: str, request) -> Any:
    request.with_header(correlation_id=0, client_id="gregor-console")
    decoded = decode_request(bytes(request.encode(header=True)))
    with _as_console(broker, client_ip):
        return await dispatch(broker, decoded)


def _failure(code: int, message: str | None, what: str) -> Refused:
    name = ErrorCode(code).name
    status = (403 if "AUTHORIZATION" in name else 404 if "UNKNOWN" in name
              else 400 if name.startswith("INVALID") else 409)
    return Refused(status, f"{what}: {name}" + (f" ({message})" if message else ""))


async def delete_topic(broker: Broker, client_ip: str, name: str) -> dict[str, Any]:
    answer = await _call(broker, client_ip, DeleteTopicsRequest[4](topic_names=[name], timeout_ms=TIMEOUT_MS))
    result = answer.responses[0]
    if result.error_code:
        raise _failure(result.error_code, None, f"cannot delete topic {name!r}")
    return {"deleted": name}


async def create_view(broker: Broker, client_ip: str, name: str, source: str, tags: list[str]) -> dict[str, Any]:
    if not name or not source or not tags:
        raise Refused(400, "a view needs a name, a source topic and at least one tag")
    R = CreateTopicsRequest[5]
    Config = R.CreatableTopic.CreatableTopicConfig
    topic = R.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1, assignments=[],
                             configs=[Config(name="view.source", value=source),
                                      Config(name="view.tags", value=",".join(tags))])
    answer = await _call(broker, client_ip, R(topics=[topic], timeout_ms=TIMEOUT_MS, validate_only=False))
    result = answer.topics[0]
    if result.error_code:
        raise _failure(result.error_code, result.error_message, f"cannot create view {name!r}")
    return {"created": name}


def reset_plan(broker: Broker, group: str, to: str, moment: str | None, topic: str | None) -> list[dict[str, Any]]:
    """The offsets a reset would commit: every partition of `topic`, or of each topic the group has
    committed offsets on; earliest, latest, or the first offset at or after a time (the log end
    when there is none, as kafka-consumer-groups does)."""
    coordinator = broker.coordinator
    known = {g: state for g, _, state in coordinator.list_groups()}
    if group not in known:
        raise NotFound(f"unknown group {group!r}")
    if known[group] not in INACTIVE:
        members = len(coordinator.describe(group).members)
        raise Refused(409, f"group {group!r} is {known[group]} with {members} member(s): offsets can only be "
                           "reset while it is inactive; stop its consumers first")
    if to not in ("earliest", "latest", "datetime"):
        raise Refused(400, "to is earliest, latest or datetime")
    since = None
    if to == "datetime":
        try:
            since = parse_time_ms(moment or "")
        except UsageError as exc:
            raise Refused(400, str(exc)) from None
    committed = coordinator.committed_all(group)
    if topic:
        meta = broker.topic(topic)
        if meta is None:
            raise NotFound(f"unknown topic {topic!r}")
        partitions = [(topic, p) for p in range(meta.partitions)]
    else:
        partitions = sorted(committed)
        if not partitions:
            raise Refused(400, f"group {group!r} has no committed offsets: name a topic")
    plan = []
    for t, p in partitions:
        meta = broker.topic(t)
        if meta is None:
            continue
        view = view_of(meta)
        source = view.source if view else t
        store = broker.store
        if to == "earliest":
            new = store.log_start_offset(source, p)
        elif to == "latest":
            new = store.high_watermark(source, p)
        else:
            new, _ = store.offset_for_timestamp(source, p, since)
            if new < 0:
                new = store.high_watermark(source, p)
        old = committed.get((t, p))
        plan.append({"topic": t, "partition": p, "old": old[0] if old else None, "new": new})
    return plan


async def reset_offsets(broker: Broker, client_ip: str, group: str, to: str, moment: str | None,
                        topic: str | None, dry_run: bool) -> dict[str, Any]:
    plan = reset_plan(broker, group, to, moment, topic)
    if dry_run or not plan:
        return {"offsets": plan, "dry_run": dry_run}
    R = OffsetCommitRequest[7]
    T = R.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for move in plan:
        by_topic.setdefault(move["topic"], []).append(
            P(partition_index=move["partition"], committed_offset=move["new"], committed_leader_epoch=-1,
              committed_metadata=""))
    answer = await _call(broker, client_ip, R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                              group_instance_id=None,
                                              topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
    for t in answer.topics:
        for p in t.partitions:
            if p.error_code:
                raise _failure(p.error_code, None, f"cannot commit {t.name}-{p.partition_index} for group {group!r}")
    return {"offsets": plan, "dry_run": False}
