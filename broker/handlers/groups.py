"""Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups.

Only translates between kafka-python bodies and broker.groups.coordinator; every
group rule lives there. Unknown topics in OffsetCommit are refused here, since
that is a metadata question, as in Kafka's KafkaApis.
"""

from __future__ import annotations

from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.broker import Broker
from broker.groups.member import JoinRequest
from broker.net.peer import peer_host
from protocol.codec import Request
from protocol.errors import ErrorCode

GROUP_KEY, TRANSACTION_KEY = 0, 1
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"  # KIP-848's (broker/groups/consumer_group.py)
SHARE_GROUP_TYPE = "share"  # KIP-932's (broker/groups/share_group.py)
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what a group allows without an authorizer
GROUP_OPERATIONS = {3, 6, 8, 10, 11}
# Kafka's Errors messages, sent where Kafka sends the error's default message
GROUP_REFUSED_MESSAGE = "Group authorization failed."
TRANSACTIONAL_ID_REFUSED_MESSAGE = "Transactional Id authorization failed."


def _client_host(request: Request) -> str:
    return peer_host.get()  # "/<ip>", as Kafka reports it


async def handle_find_coordinator(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    key_type = body.key_type if version >= 1 else GROUP_KEY
    if version >= 4:
        coordinators = [cls.Coordinator(key=key, **_coordinator(broker, key_type, key, ok_message="", batched=True))
                        for key in body.coordinator_keys]
        return cls[version](throttle_time_ms=0, coordinators=coordinators)
    return cls[version](throttle_time_ms=0, **_coordinator(broker, key_type, body.key, ok_message="NONE"))


def _coordinator(broker: Broker, key_type: int, key: str, ok_message: str, batched: bool = False) -> dict:
    refused = None  # v4+ answers a refusal with an empty message, older versions with Kafka's text
    if key_type == GROUP_KEY and not broker.allowed(Op.DESCRIBE, Res.GROUP, key):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED, "" if batched else GROUP_REFUSED_MESSAGE
    elif key_type == TRANSACTION_KEY and not broker.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, key):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "" if batched else TRANSACTIONAL_ID_REFUSED_MESSAGE
    if refused is not None:
        return {"error_code": refused[0], "error_message": refused[1], "node_id": -1, "host": "", "port": -1}
    if key_type in (GROUP_KEY, TRANSACTION_KEY):  # this broker coordinates transactions too
        master = broker.topology.coordinator(key)  # the master of the key's broker group
        endpoint = broker.topology.endpoint(master) if master != broker.node_id else None
        if master < 0 or (master != broker.node_id and endpoint is None):
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": "" if batched else
                    "The coordinator is not available.", "node_id": -1, "host": "", "port": -1}
        if endpoint is not None:
            return {"error_code": 0, "error_message": ok_message, "node_id": master, "host": endpoint[0],
                    "port": endpoint[1]}
        return {"error_code": 0, "error_message": ok_message, "node_id": broker.node_id,
                "host": broker.advertised_host, "port": broker.advertised_port}
    else:
        error, message = ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}"
    return {"error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}


async def handle_join_group(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return cls[version](throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                            protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                            skip_assignment=False, member_id="", members=[])
    join = JoinRequest(
        member_id=body.member_id,
        instance_id=body.group_instance_id if version >= 5 else None,
        client_id=request.header.client_id or "",
        client_host=_client_host(request),
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        require_known_member_id=version >= 4,
    )
    result = await broker.coordinator.join(body.group_id, join, broker.subscribable_topics())
    members = [cls.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.instance_id,
                                           metadata=m.metadata) for m in result.members]
    protocol_name = result.protocol_name if version >= 7 else result.protocol_name or ""
    return cls[version](throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
                        protocol_type=result.protocol_type, protocol_name=protocol_name,
                        leader=result.leader, skip_assignment=False, member_id=result.member_id,
                        members=members)


async def handle_sync_group(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return cls[version](throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, protocol_type=None,
                            protocol_name=None, assignment=b"")
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    result = await broker.coordinator.sync(
        body.group_id, body.member_id, body.group_instance_id if version >= 3 else None, body.generation_id,
        body.protocol_type if version >= 5 else None, body.protocol_name if version >= 5 else None, assignments)
    return cls[version](throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                        protocol_name=result.protocol_name, assignment=result.assignment)


async def handle_heartbeat(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return request.spec.response[version](throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = broker.coordinator.heartbeat(body.group_id, body.member_id,
                                         body.group_instance_id if version >= 3 else None, body.generation_id)
    return request.spec.response[version](throttle_time_ms=0, error_code=error)


async def handle_leave_group(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    if not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        return cls[version](throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    error, member_errors = await broker.coordinator.leave(body.group_id, leaving)
    if version < 3:
        return cls[version](throttle_time_ms=0, error_code=error or (member_errors or [0])[0])
    members = [cls.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=member_error)
               for (member_id, instance_id), member_error in zip(leaving, member_errors)]
    return cls[version](throttle_time_ms=0, error_code=error, members=members)


async def handle_offset_commit(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    Topic = cls.OffsetCommitResponseTopic
    Partition = Topic.OffsetCommitResponsePartition
    errors: dict[tuple[str, int], int] = {}
    entries = []
    group_ok = broker.allowed(Op.READ, Res.GROUP, body.group_id)
    for t in body.topics:
        meta = broker.topic(t.name)
        topic_ok = group_ok and broker.allowed(Op.READ, Res.TOPIC, t.name)
        for p in t.partitions:
            if not topic_ok:
                errors[(t.name, p.partition_index)] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if group_ok
                                                       else ErrorCode.GROUP_AUTHORIZATION_FAILED)
            elif meta is None or not 0 <= p.partition_index < meta.partitions:
                errors[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = p.committed_leader_epoch if version >= 6 else -1
                entries.append((t.name, p.partition_index, p.committed_offset, p.committed_metadata, epoch))
    if entries and not broker.coordinates(body.group_id):  # a cluster node that does not coordinate the group
        errors.update({(topic, partition): ErrorCode.NOT_COORDINATOR for topic, partition, *_ in entries})
    elif entries:
        results = await broker.coordinator.commit(
            body.group_id, body.member_id, body.group_instance_id if version >= 7 else None,
            body.generation_id_or_member_epoch, entries)
        replicated = await broker.replicated() if any(e == ErrorCode.NONE for e in results) else ErrorCode.NONE
        for (topic, partition, *_), error in zip(entries, results):
            # as Kafka answers a commit its offsets topic could not replicate: find the coordinator again
            errors[(topic, partition)] = error or (replicated and ErrorCode.COORDINATOR_NOT_AVAILABLE)
    topics = [Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index,
                                                       error_code=errors[(t.name, p.partition_index)])
                                             for p in t.partitions])
              for t in body.topics]
    return cls[version](throttle_time_ms=0, topics=topics)


async def handle_offset_fetch(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    if version >= 8:
        Group = cls.OffsetFetchResponseGroup
        groups = []
        for g in body.groups:
            if not broker.allowed(Op.DESCRIBE, Res.GROUP, g.group_id):
                groups.append(Group(group_id=g.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[]))
                continue
            if not broker.coordinates(g.group_id):
                groups.append(Group(group_id=g.group_id, error_code=ErrorCode.NOT_COORDINATOR, topics=[]))
                continue
            groups.append(Group(group_id=g.group_id, error_code=0, topics=_fetched(
                broker, g.group_id, g.topics, Group.OffsetFetchResponseTopics,
                Group.OffsetFetchResponseTopics.OffsetFetchResponsePartitions)))
        return cls[version](throttle_time_ms=0, groups=groups)
    Topic = cls.OffsetFetchResponseTopic
    if not broker.allowed(Op.DESCRIBE, Res.GROUP, body.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        topics = [] if version >= 2 else [Topic(name=t.name, partitions=[Topic.OffsetFetchResponsePartition(
            partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=error)
            for i in t.partition_indexes]) for t in body.topics or []]
        return cls[version](throttle_time_ms=0, topics=topics, error_code=error)
    topics = _fetched(broker, body.group_id, body.topics, Topic, Topic.OffsetFetchResponsePartition)
    return cls[version](throttle_time_ms=0, topics=topics, error_code=0)


def _fetched(broker: Broker, group_id: str, requested, Topic, Partition) -> list:
    """The committed offsets asked for; a topic the client may not Describe is left out of a
    whole-group answer and answers TOPIC_AUTHORIZATION_FAILED when named, as in Kafka."""
    def partition(index: int, committed, error: int = 0) -> object:
        offset, metadata, epoch = committed if committed is not None else (-1, "", -1)
        return Partition(partition_index=index, committed_offset=offset, committed_leader_epoch=epoch,
                         metadata=metadata or "", error_code=error)

    coordinator = broker.coordinator
    if requested is None:  # every partition the group has committed
        by_topic: dict[str, list[tuple[int, object]]] = {}
        for (topic, index), committed in sorted(coordinator.committed_all(group_id).items()):
            by_topic.setdefault(topic, []).append((index, committed))
        return [Topic(name=topic, partitions=[partition(i, c) for i, c in parts]) for topic, parts in by_topic.items()
                if broker.allowed(Op.DESCRIBE, Res.TOPIC, topic)]
    topics = []
    for t in requested:
        if broker.allowed(Op.DESCRIBE, Res.TOPIC, t.name):
            parts = [partition(i, coordinator.committed(group_id, t.name, i)) for i in t.partition_indexes]
        else:
            parts = [partition(i, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in t.partition_indexes]
        topics.append(Topic(name=t.name, partitions=parts))
    return topics


async def handle_describe_groups(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    Described = cls.DescribedGroup
    Member = Described.DescribedGroupMember
    asked = version >= 3 and body.include_authorized_operations
    groups = []
    for group_id in body.groups:
        if not broker.allowed(Op.DESCRIBE, Res.GROUP, group_id):
            groups.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                                    group_id=group_id, group_state="", protocol_type="", protocol_data="",
                                    members=[], authorized_operations=None))
            continue
        if not broker.coordinates(group_id):
            groups.append(Described(error_code=ErrorCode.NOT_COORDINATOR, error_message=None, group_id=group_id,
                                    group_state="", protocol_type="", protocol_data="", members=[],
                                    authorized_operations=None))
            continue
        if broker.coordinator.consumer_group(group_id) is not None:  # Kafka 4's answer for a KIP-848 group
            groups.append(Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                    error_message=f"Group {group_id} is not a classic group.", group_id=group_id,
                                    group_state="", protocol_type="", protocol_data="", members=[],
                                    authorized_operations=None))
            continue
        operations = None
        if asked:
            operations = GROUP_OPERATIONS if broker.authorizer is None else broker.authorized_operations(
                Res.GROUP, group_id)
        summary = broker.coordinator.describe(group_id)
        members = [Member(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                          client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                   for m in summary.members]
        groups.append(Described(error_code=0, error_message=None, group_id=group_id, group_state=summary.state,
                                protocol_type=summary.protocol_type, protocol_data=summary.protocol_data,
                                members=members, authorized_operations=operations))
    return cls[version](throttle_time_ms=0, groups=groups)


async def handle_list_groups(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    states = {s.lower() for s in body.states_filter} if version >= 4 and body.states_filter else None
    types = {t.lower() for t in body.types_filter} if version >= 5 and body.types_filter else None
    listed = []
    every = broker.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)  # else only the groups it may Describe
    # a cluster's clients ask every node and merge the answers: a follower coordinates none
    following = not broker.topology.leading
    coordinator = broker.coordinator
    shares = [] if following else [(g, "share", broker.share.group_state(g)) for g in sorted(broker.share.known_groups())
                                   if broker.coordinates(g)]
    for group_id, protocol_type, state in ([] if following else coordinator.list_groups()) + shares:
        group_type = (SHARE_GROUP_TYPE if protocol_type == "share" else CONSUMER_GROUP_TYPE
                      if group_id in coordinator.consumer_groups else CLASSIC_GROUP_TYPE)
        if types is not None and group_type not in types:
            continue
        if not every and not broker.allowed(Op.DESCRIBE, Res.GROUP, group_id):
            continue
        if states is None or state.lower() in states:
            listed.append(cls.ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state,
                                          group_type=group_type))
    return cls[version](throttle_time_ms=0, error_code=0, groups=listed)


async def handle_delete_groups(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    results = [cls.DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
                                        if not broker.allowed(Op.DELETE, Res.GROUP, g)
                                        else ErrorCode.NOT_COORDINATOR if not broker.coordinates(g)
                                        else await broker.share.delete(g) if g in broker.share.known_groups()
                                        else await broker.coordinator.delete(g))
               for g in body.groups_names]
    return cls[version](throttle_time_ms=0, results=results)
