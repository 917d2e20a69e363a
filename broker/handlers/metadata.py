"""Metadata and DescribeCluster: one broker that leads every partition, or, in a broker group
(broker/cluster/node.py), the group's master leading them, its nodes as replicas, its sync-state
set as the ISR.

Unknown topics are auto-created when `auto.create.topics.enable` and the
request allow it; like Kafka 3.9, the creating request still answers
UNKNOWN_TOPIC_OR_PARTITION and the next one sees the topic.
"""

from __future__ import annotations

import uuid

from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.broker import Broker, topic_name_error
from protocol.codec import Request
from protocol.errors import ErrorCode
from store import TopicMeta

NO_AUTHORIZED_OPERATIONS = None  # kafka-python encodes None as -2147483648 ("not requested")


async def handle_metadata(broker: Broker, request: Request):
    version = request.header.api_version
    cls = request.spec.response
    body = request.body
    all_topics = body.topics is None or (version == 0 and not body.topics)
    if all_topics:
        wanted = sorted(broker.store.topics())
        allow_create = False
    else:
        wanted = [t.name if t.name is not None or version < 10 else _by_id(broker, t.topic_id) for t in body.topics]
        allow_create = body.allow_auto_topic_creation if version >= 4 else True
    allow_create = allow_create and broker.config["auto.create.topics.enable"]
    ops = version >= 8 and body.include_topic_authorized_operations
    topics, refused = [], []
    if broker.authorizer is not None:  # Kafka's order: answered topics, then those refused creation, then Describe
        may_describe = [n for n in wanted if isinstance(n, uuid.UUID) or broker.allowed(Op.DESCRIBE, Res.TOPIC, n)]
        if not all_topics:
            describable = set(may_describe)
            refused = [n for n in dict.fromkeys(wanted) if n not in describable]
        wanted = may_describe
    refused_create = []
    for name in wanted:
        if isinstance(name, uuid.UUID):  # asked by id (v12; KIP-848's consumers look assigned topics up so)
            topics.append(cls.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=name,
                                                    is_internal=False, partitions=[],
                                                    authorized_operations=_operations(broker, "", ops)))
            continue
        meta = broker.topic(name) if name else None
        if meta is None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and allow_create:
                if not (broker.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME) or broker.allowed(Op.CREATE, Res.TOPIC, name)):
                    refused_create.append(name)
                    continue
                broker.auto_create(name)
            topics.append(cls.MetadataResponseTopic(error_code=error, name=name, topic_id=None, is_internal=False,
                                                    partitions=[],
                                                    authorized_operations=_operations(broker, name, ops)))
            continue
        topics.append(_topic(cls, broker, meta, _operations(broker, name, ops)))
    for name in refused_create + refused:
        topics.append(cls.MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                                topic_id=None, is_internal=False, partitions=[],
                                                authorized_operations=_operations(broker, name, ops)))
    cluster_ops = NO_AUTHORIZED_OPERATIONS
    if 8 <= version <= 10 and body.include_cluster_authorized_operations and broker.authorizer is not None:
        cluster_ops = (broker.authorized_operations(Res.CLUSTER, CLUSTER_NAME)
                       if broker.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME) else set())
    brokers = [cls.MetadataResponseBroker(node_id=node, host=host, port=port, rack=rack)
               for node, host, port, rack in live_nodes(broker)]
    return cls[version](throttle_time_ms=0, brokers=brokers, cluster_id=broker.cluster_id,
                        controller_id=_controller(broker), topics=topics, authorized_operations=cluster_ops)


def _by_id(broker: Broker, topic_id: uuid.UUID) -> str | uuid.UUID:
    """The name of the topic with this id, or the id itself when no topic has it or the client may
    not describe it (Kafka answers both UNKNOWN_TOPIC_ID: an id reveals nothing)."""
    name = next((m.name for m in broker.store.topics().values() if m.topic_id == topic_id), None)
    return name if name is not None and broker.permits(Op.DESCRIBE, Res.TOPIC, name) else topic_id


def live_nodes(broker: Broker) -> list[tuple[int, str, int, str | None]]:
    """The live nodes and their racks: this one as the connection's listener advertises it, the
    others as they registered in ZooKeeper (broker/cluster/zk.py)."""
    me = (broker.node_id, broker.advertised_host, broker.advertised_port, broker.config["broker.rack"] or None)
    return [me if node == broker.node_id else (node, host, port, rack)
            for node, host, port, rack in broker.topology.live_brokers()]


def _controller(broker: Broker) -> int:
    """Admin requests go to the controller: the group's master (-1 while it has none)."""
    return broker.topology.master


def _operations(broker: Broker, name: str, asked: bool):
    return broker.authorized_operations(Res.TOPIC, name) if asked else NO_AUTHORIZED_OPERATIONS


def _topic(cls, broker: Broker, meta: TopicMeta, operations=NO_AUTHORIZED_OPERATIONS):
    Partition = cls.MetadataResponseTopic.MetadataResponsePartition
    partitions = []  # each as its broker group has it: leader = the master, replicas = the nodes, ISR = the set
    for i in range(meta.partitions):
        leader, epoch, replicas, isr, offline = broker.topology.partition_view(meta.name, i)
        partitions.append(Partition(
            error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE, partition_index=i,
            leader_id=leader, leader_epoch=epoch, replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline))
    return cls.MetadataResponseTopic(error_code=0, name=meta.name, topic_id=meta.topic_id, is_internal=False,
                                     partitions=partitions, authorized_operations=operations)


async def handle_describe_cluster(broker: Broker, request: Request):
    cls = request.spec.response
    body = request.body
    operations = NO_AUTHORIZED_OPERATIONS
    if body.include_cluster_authorized_operations and broker.authorizer is not None:
        operations = broker.authorized_operations(Res.CLUSTER, CLUSTER_NAME)
    nodes = [cls.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=rack)
             for node, host, port, rack in live_nodes(broker)]
    return cls[request.header.api_version](
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=broker.cluster_id,
        controller_id=_controller(broker), brokers=nodes, authorized_operations=operations)


MAX_PARTITIONS_PER_ANSWER = 2000  # Kafka's max.request.partition.size.limit default


async def handle_describe_topic_partitions(broker: Broker, request: Request):
    """DescribeTopicPartitions (KIP-966): topics sorted by name, their partitions as Metadata shows
    them, at most ResponsePartitionLimit partitions per answer and a cursor to go on from."""
    body = request.body
    cls = request.spec.response[request.header.api_version]
    Topic = cls.DescribeTopicPartitionsResponseTopic
    Partition = Topic.DescribeTopicPartitionsResponsePartition
    every = not body.topics
    names = sorted(broker.store.topics()) if every else sorted({t.name for t in body.topics})
    cursor = body.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    limit = max(1, min(body.response_partition_limit, MAX_PARTITIONS_PER_ANSWER))
    topics, left, next_cursor = [], limit, None
    for name in names:
        if name.startswith("__"):
            if every:
                continue  # Gregor's internal topics are never shown
        if not broker.allowed(Op.DESCRIBE, Res.TOPIC, name):
            if not every:
                topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=uuid.UUID(int=0),
                                    is_internal=False, partitions=[]))
            continue
        meta = broker.topic(name) if not name.startswith("__") else None
        if meta is None:
            topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=uuid.UUID(int=0),
                                is_internal=False, partitions=[]))
            continue
        if left <= 0:
            next_cursor = cls.Cursor(topic_name=name, partition_index=0)
            break
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = []
        for i in range(first, meta.partitions):
            if left <= 0:
                next_cursor = cls.Cursor(topic_name=name, partition_index=i)
                break
            leader, epoch, replicas, isr, offline = broker.topology.partition_view(name, i)
            partitions.append(Partition(
                error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE, partition_index=i,
                leader_id=leader, leader_epoch=epoch, replica_nodes=replicas, isr_nodes=isr,
                eligible_leader_replicas=[], last_known_elr=[], offline_replicas=offline))
            left -= 1
        topics.append(Topic(error_code=0, name=name, topic_id=meta.topic_id, is_internal=False, partitions=partitions))
        if next_cursor is not None:
            break
    return cls(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
