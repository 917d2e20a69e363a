"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the consumer group protocol of KIP-848 (Kafka's
GroupCoordinatorService.consumerGroupHeartbeat and consumerGroupDescribe). Topics travel by id on
the wire and by name in broker/groups/consumer_group.py; this module translates."""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING

from broker.groups.consumer_group import Heartbeat
from broker.net.peer import peer_host
from broker.security.acl import Op, Res
from protocol.codec import Request
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.broker import Broker


async def handle_consumer_group_heartbeat(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response[version]
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return cls(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                   member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    counts, names = broker.subscribable_topics(), broker.topic_names_by_id()
    member_id = body.member_id
    if version == 0 and body.member_epoch == 0 and not member_id:  # v0: the coordinator names new members
        member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    owned = None
    if body.topic_partitions is not None:
        owned = {names[tp.topic_id]: frozenset(tp.partitions) for tp in body.topic_partitions if tp.topic_id in names}
    beat = Heartbeat(member_id=member_id, member_epoch=body.member_epoch, instance_id=body.instance_id,
                     rack_id=body.rack_id, rebalance_timeout_ms=body.rebalance_timeout_ms,
                     subscribed_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
                     subscribed_regex=body.subscribed_topic_regex if version >= 1 else None,
                     server_assignor=body.server_assignor, owned=owned,
                     client_id=request.header.client_id or "", client_host=peer_host.get())
    answer = await broker.coordinator.consumer_heartbeat(body.group_id, beat, counts)
    assignment = None
    if answer.assignment is not None:
        ids = {name: topic_id for topic_id, name in names.items()}
        assignment = cls.Assignment(topic_partitions=[
            cls.Assignment.TopicPartitions(topic_id=ids[t], partitions=sorted(ps))
            for t, ps in sorted(answer.assignment.items()) if t in ids])
    return cls(throttle_time_ms=0, error_code=answer.error, error_message=answer.message,
               member_id=answer.member_id, member_epoch=answer.member_epoch if not answer.error else -1,
               heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)


async def handle_consumer_group_describe(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response[version]
    Group = cls.DescribedGroup
    Member = Group.Member
    Assignment = Member.Assignment
    Partitions = Assignment.TopicPartitions
    topics = broker.store.topics()

    def shown(assigned) -> object:
        return Assignment(topic_partitions=[
            Partitions(topic_id=topics[t].topic_id, topic_name=t, partitions=sorted(ps))
            for t, ps in sorted(assigned.items()) if t in topics])

    groups = []
    coordinator = broker.coordinator
    for group_id in body.group_ids:
        def failed(code: int, message: str | None = None):
            return Group(error_code=code, error_message=message, group_id=group_id, group_state="",
                         group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                         authorized_operations=-2**31)
        if not broker.allowed(Op.DESCRIBE, Res.GROUP, group_id):
            groups.append(failed(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not broker.coordinates(group_id):
            groups.append(failed(ErrorCode.NOT_COORDINATOR))
            continue
        group = coordinator.consumer_group(group_id)
        if group is None:
            groups.append(failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
            continue
        chosen = next((m.server_assignor for m in group.members.values() if m.server_assignor),
                      group.settings.assignors[0])
        members = [Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                          member_epoch=m.assignment.epoch, client_id=m.client_id, client_host=m.client_host,
                          subscribed_topic_names=sorted(m.subscribed_names), subscribed_topic_regex=m.subscribed_regex,
                          assignment=shown(m.assignment.assigned), target_assignment=shown(group.target.get(m.member_id, {})),
                          member_type=0 if m.classic else 1)  # KIP-1099: 0 classic, 1 consumer protocol
                   for m in group.members.values()]
        operations = broker.authorized_operations(Res.GROUP, group_id) if body.include_authorized_operations else None
        groups.append(Group(error_code=0, error_message=None, group_id=group_id,
                            group_state=group.state.capitalize(), group_epoch=group.group_epoch,
                            assignment_epoch=group.assignment_epoch, assignor_name=chosen, members=members,
                            authorized_operations=-2**31 if operations is None else sum(1 << op for op in operations)))
    return cls(throttle_time_ms=0, groups=groups)
