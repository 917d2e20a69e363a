"""Members speaking the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in a
consumer-protocol group: KIP-848's online migration, Kafka's GroupMetadataManager
classicGroupJoinToConsumerGroup, …SyncToConsumerGroup, …HeartbeatToConsumerGroup and
…LeaveToConsumerGroup. The group's server-side assignor decides for them as for every member; a
JoinGroup is their heartbeat with a subscription (its ConsumerProtocolSubscription: topics, owned
partitions, rack), SyncGroup hands them their current partitions, and a Heartbeat answers
REBALANCE_IN_PROGRESS when they must join again to move on. Sans-IO, time passed in, like
broker/groups/consumer_group.py whose groups it acts on."""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from broker.groups.consumer_group import ClassicProtocol, ConsumerGroup, Member
from broker.groups.member import JoinRequest, JoinResult, SyncResult
from broker.groups.reconcile import FencedMember, MemberState, Partitions
from protocol.errors import ErrorCode

PROTOCOL_TYPE = "consumer"  # the embedded protocol every member of a consumer-protocol group speaks
# what kafka-python's decoders raise for bytes that are not what they read (random bytes: these two)
UNREADABLE = (ValueError, struct.error, UnicodeDecodeError, IndexError)


def subscription(metadata: bytes) -> ConsumerProtocolSubscription | None:
    """A member's ConsumerProtocolSubscription (None: not one). Newer versions than kafka-python
    knows are read as its newest, as Kafka's ConsumerProtocol reads them."""
    try:
        return ConsumerProtocolSubscription.decode(metadata)
    except UNREADABLE:
        return None


def assigned_partitions(data: bytes) -> dict[str, frozenset[int]] | None:
    """A ConsumerProtocolAssignment's partitions (None: not one; empty bytes: none assigned)."""
    if not data:
        return {}
    try:
        decoded = ConsumerProtocolAssignment.decode(data)
    except UNREADABLE:
        return None
    found: dict[str, frozenset[int]] = {}
    for tp in decoded.assigned_partitions or []:
        found[tp.topic] = found.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return found


def encoded_assignment(partitions: Partitions, protocols: tuple[tuple[str, bytes], ...]) -> bytes:
    """Partitions as a ConsumerProtocolAssignment of the version of the member's preferred
    protocol's subscription (Kafka's prepareAssignment)."""
    metadata = protocols[0][1] if protocols else b""
    version = int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0
    version = min(max(version, 0), ConsumerProtocolAssignment.max_version)
    tps = [ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
           for t, ps in sorted(partitions.items()) if ps]
    return bytes(ConsumerProtocolAssignment(version=version, assigned_partitions=tps, user_data=None).encode(
        version=version))


def supports(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Kafka's supportsClassicProtocols: the consumer protocol type, and a protocol every classic
    member already in the group supports."""
    if protocol_type != PROTOCOL_TYPE or not names:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> tuple[int, Member | None]:
    """The classic member a SyncGroup, Heartbeat or LeaveGroup names (Kafka's validateConsumerGroupMember
    and throwIfMemberDoesNotUseClassicProtocol)."""
    if instance_id is not None:
        held = group.static.get(instance_id)
        member = group.members.get(held) if held is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if member_id and member.member_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID, None
    else:
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
    if member.classic is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    return ErrorCode.NONE, member


def _rejoin(member: Member, now_ms: int) -> int:
    if member.join_deadline_ms is None:
        member.join_deadline_ms = now_ms + member.rebalance_timeout_ms
    return ErrorCode.REBALANCE_IN_PROGRESS


def join(group: ConsumerGroup, now_ms: int, request: JoinRequest, topics: Mapping[str, int],
         new_member_id: str) -> JoinResult:
    """A JoinGroup to a consumer-protocol group that has members; `new_member_id` names a member
    joining without one. Answered at once with the member's epoch as its generation."""
    member_id = request.member_id or new_member_id
    names = {name for name, _ in request.protocols}
    existing = group.members.get(member_id) if request.instance_id is None else \
        group.members.get(group.static.get(request.instance_id, ""))
    if existing is None and len(group.members) >= group.settings.max_size:
        return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
    if not supports(group, request.protocol_type, names):
        return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
    if not request.member_id and request.instance_id is None and request.require_known_member_id:
        return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
    subscribed = subscription(request.protocols[0][1])
    if subscribed is None:
        return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
    new = existing is None
    if existing is not None and existing.classic is None:
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)  # a consumer-protocol member's id
    if request.instance_id is not None and existing is not None and existing.member_id != member_id:
        if request.member_id:
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        group.replace_static(existing.member_id, member_id)  # a restarted static member takes its place
    member = group.members.get(member_id)
    if member is None:
        member = group.add_member(Member(member_id, request.instance_id, None, request.client_id,
                                         request.client_host))
    changed = new
    topics_named = frozenset(subscribed.topics or ())
    if topics_named != member.subscribed_names:
        member.subscribed_names, changed = topics_named, True
    if member.server_assignor is not None:  # classic members leave the choice to the group
        member.server_assignor, changed = None, True
    member.rack_id = subscribed.rack_id if subscribed.version >= 3 else member.rack_id
    member.rebalance_timeout_ms = request.rebalance_timeout_ms
    member.client_id, member.client_host = request.client_id, request.client_host
    member.classic = ClassicProtocol(request.session_timeout_ms, request.protocols)
    owned: dict[str, frozenset[int]] = {}
    for tp in (subscribed.owned_partitions or []) if subscribed.version >= 1 else []:
        owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    try:
        group.advance(now_ms, member, changed, topics, owned)
    except FencedMember:  # cannot happen to a member whose state is known; answered as Kafka would a fenced one
        group.remove(member_id)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
    member.join_deadline_ms = None
    member.session_deadline_ms = now_ms + request.session_timeout_ms
    member.sync_deadline_ms = now_ms + request.rebalance_timeout_ms
    return JoinResult(ErrorCode.NONE, member_id, member.assignment.epoch, PROTOCOL_TYPE, request.protocols[0][0], "")


def sync(group: ConsumerGroup, now_ms: int, member_id: str, instance_id: str | None, generation_id: int,
         protocol_type: str | None, protocol_name: str | None) -> SyncResult:
    """A SyncGroup: the member's current partitions (what it may consume now)."""
    error, member = _member(group, member_id, instance_id)
    if member is None:
        return SyncResult(error)
    if generation_id != member.assignment.epoch:
        return SyncResult(ErrorCode.ILLEGAL_GENERATION)
    if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or \
            (protocol_name is not None and protocol_name != member.classic.protocols[0][0]):
        return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if group.group_epoch > member.assignment.epoch and member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
        return SyncResult(_rejoin(member, now_ms))
    member.sync_deadline_ms = None
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    return SyncResult(ErrorCode.NONE, protocol_type, protocol_name,
                      encoded_assignment(member.assignment.assigned, member.classic.protocols))


def heartbeat(group: ConsumerGroup, now_ms: int, member_id: str, instance_id: str | None, generation_id: int) -> int:
    """A Heartbeat: REBALANCE_IN_PROGRESS when the member must join again — the group moved to a
    new epoch, it has partitions to give up, or the ones it waits for are free."""
    error, member = _member(group, member_id, instance_id)
    if member is None:
        return error
    if generation_id != member.assignment.epoch:
        return ErrorCode.ILLEGAL_GENERATION
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    state = member.assignment.state
    if (member.assignment.epoch < group.group_epoch or state is MemberState.UNREVOKED_PARTITIONS
            or (state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member))):
        return _rejoin(member, now_ms)
    return ErrorCode.NONE


def leave(group: ConsumerGroup, member_id: str, instance_id: str | None) -> int:
    """One member of a LeaveGroup (an admin may name a static member by its instance id alone)."""
    error, member = _member(group, member_id, instance_id)
    if member is None:
        return error
    group.remove(member.member_id)
    return ErrorCode.NONE


def commit_error(member: Member, generation_id: int) -> int:
    """An OffsetCommit of a classic member: its generation is its member epoch (Kafka's validateMemberEpoch)."""
    return ErrorCode.NONE if generation_id == member.assignment.epoch else ErrorCode.ILLEGAL_GENERATION
