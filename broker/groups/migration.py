"""A group changing protocol with its members in it (KIP-848's online migration, Kafka's
`group.consumer.migration.policy`): a classic group becomes a consumer-protocol group when a
member joins it with ConsumerGroupHeartbeat (Kafka's ConsumerGroup.fromClassicGroup), and a
consumer-protocol group whose last consumer-protocol member leaves becomes a classic group again
(ClassicGroup.fromConsumerGroup). Each member keeps its partitions across the change; the group
then rebalances under its new protocol. Sans-IO: the coordinator decides when, this module how."""

from __future__ import annotations

from collections.abc import Mapping

from broker.groups.classic_members import PROTOCOL_TYPE, assigned_partitions, encoded_assignment, subscription
from broker.groups.consumer_group import ClassicProtocol, ConsumerGroup, Member, Settings
from broker.groups.member import JoinResult, SyncResult
from broker.groups.member import Member as ClassicMember
from broker.groups.reconcile import MemberAssignment, MemberState
from broker.groups.state import Group, GroupState
from protocol.errors import ErrorCode

POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")  # Kafka's ConsumerGroupMigrationPolicy


def upgrades(policy: str) -> bool:
    return policy in ("upgrade", "bidirectional")


def downgrades(policy: str) -> bool:
    return policy in ("downgrade", "bidirectional")


def can_upgrade(classic: Group, policy: str, max_size: int) -> bool:
    """Kafka's validateOnlineUpgrade: allowed, the embedded consumer protocol, not too many members."""
    return upgrades(policy) and classic.protocol_type == PROTOCOL_TYPE and len(classic.members) <= max_size


def to_consumer_group(classic: Group, settings: Settings, topics: Mapping[str, int], now_ms: int) -> ConsumerGroup | None:
    """The consumer-protocol group a classic group becomes: its generation as the group epoch, each
    member stable at it with the partitions it was given as its target (None: a member's
    subscription or assignment is not the consumer protocol's). Members waiting on a JoinGroup or
    SyncGroup are told REBALANCE_IN_PROGRESS, to join the new group."""
    generation = classic.generation_id
    group = ConsumerGroup(classic.group_id, settings)
    group.group_epoch = group.assignment_epoch = generation
    for old in classic.members.values():
        subscribed = subscription(old.metadata(classic.protocol_name) if classic.protocol_name
                                  else old.protocols[0][1] if old.protocols else b"")
        assigned = assigned_partitions(old.assignment)
        if subscribed is None or assigned is None:
            return None
        member = Member(old.member_id, old.instance_id, subscribed.rack_id if subscribed.version >= 3 else None,
                        old.client_id, old.client_host, frozenset(subscribed.topics or ()),
                        rebalance_timeout_ms=old.rebalance_timeout_ms,
                        assignment=MemberAssignment(MemberState.STABLE, generation, assigned),
                        previous_epoch=generation, session_deadline_ms=now_ms + old.session_timeout_ms,
                        classic=ClassicProtocol(old.session_timeout_ms, old.protocols))
        group.add_member(member)
        group.target[member.member_id] = assigned
    subscribed_topics = {t for m in group.members.values() for t in m.subscribed_names if t in topics}
    group.subscribed_partitions = {t: topics[t] for t in subscribed_topics}
    for old in classic.members.values():
        old.answer_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, old.member_id))
        old.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
    return group


def should_downgrade(group: ConsumerGroup, leaving: Member, policy: str) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: the member leaving is the last one speaking
    the consumer protocol, and classic members remain."""
    others = [m for m in group.members.values() if m is not leaving]
    return downgrades(policy) and leaving.classic is None and bool(others) and all(m.classic for m in others)


def to_classic_group(group: ConsumerGroup, generation: int, now_ms: int, initial_rebalance_delay_ms: int) -> Group:
    """The classic group a consumer-protocol group becomes when its last consumer-protocol member
    left: stable at `generation` (the group epoch before it left), each classic member holding its
    target, then rebalancing (the members learn it from their next heartbeat), as Kafka's downgrade does."""
    classic = Group(group.group_id, initial_rebalance_delay_ms, state=GroupState.STABLE,
                    generation_id=generation, protocol_type=PROTOCOL_TYPE)
    for member in group.members.values():
        if member.classic is None:
            continue
        classic_member = ClassicMember(
            member.member_id, member.instance_id, member.client_id, member.client_host,
            member.classic.session_timeout_ms, member.rebalance_timeout_ms, PROTOCOL_TYPE, member.classic.protocols,
            session_deadline=now_ms + member.classic.session_timeout_ms,
            assignment=encoded_assignment(group.target.get(member.member_id, {}), member.classic.protocols))
        classic.add(classic_member)
    classic.protocol_name = classic.select_protocol()
    classic.rebalance(now_ms)
    return classic
