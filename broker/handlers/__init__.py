"""Request dispatch: API name -> handler coroutine (Kafka's KafkaApis.handle). Each handler takes the
broker and the decoded request and returns a kafka-python response body, or
None when the protocol says no response (Produce with acks=0)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.security.acl import Op, Res
from broker.broker import Broker
from broker.handlers import (
    acls,
    api_versions,
    configs,
    consumer_groups,
    describe_configs,
    elsewhere,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    sasl,
    share_groups,
    topics,
    txn,
)
from protocol.codec import Request
from protocol.errors import ErrorCode

Handler = Callable[[Broker, Request], Awaitable[Any]]

# by the API's name as protocol/api_versions.py spells it (Kafka's ApiKeys)
HANDLERS: dict[str, Handler] = {
    "Produce": produce.handle_produce,
    "Fetch": fetch.handle_fetch,
    "ListOffsets": offsets.handle_list_offsets,
    "Metadata": metadata.handle_metadata,
    "DescribeTopicPartitions": metadata.handle_describe_topic_partitions,
    "OffsetCommit": groups.handle_offset_commit,
    "OffsetFetch": groups.handle_offset_fetch,
    "FindCoordinator": groups.handle_find_coordinator,
    "ConsumerGroupHeartbeat": consumer_groups.handle_consumer_group_heartbeat,
    "ShareGroupHeartbeat": share_groups.handle_share_group_heartbeat,
    "ShareGroupDescribe": share_groups.handle_share_group_describe,
    "ShareFetch": share_groups.handle_share_fetch,
    "ShareAcknowledge": share_groups.handle_share_acknowledge,
    "DescribeShareGroupOffsets": share_groups.handle_describe_share_group_offsets,
    "AlterShareGroupOffsets": share_groups.handle_alter_share_group_offsets,
    "DeleteShareGroupOffsets": share_groups.handle_delete_share_group_offsets,
    "ConsumerGroupDescribe": consumer_groups.handle_consumer_group_describe,
    "JoinGroup": groups.handle_join_group,
    "Heartbeat": groups.handle_heartbeat,
    "LeaveGroup": groups.handle_leave_group,
    "SyncGroup": groups.handle_sync_group,
    "DescribeGroups": groups.handle_describe_groups,
    "ListGroups": groups.handle_list_groups,
    "SaslHandshake": sasl.handle_sasl_handshake,
    "ApiVersions": api_versions.handle_api_versions,
    "CreateTopics": topics.handle_create_topics,
    "DeleteTopics": topics.handle_delete_topics,
    "DeleteRecords": configs.handle_delete_records,
    "InitProducerId": produce.handle_init_producer_id,
    "OffsetForLeaderEpoch": offsets.handle_offset_for_leader_epoch,
    "AddPartitionsToTxn": txn.handle_add_partitions_to_txn,
    "AddOffsetsToTxn": txn.handle_add_offsets_to_txn,
    "EndTxn": txn.handle_end_txn,
    "WriteTxnMarkers": txn.handle_write_txn_markers,
    "TxnOffsetCommit": txn.handle_txn_offset_commit,
    "DescribeAcls": acls.handle_describe_acls,
    "CreateAcls": acls.handle_create_acls,
    "DeleteAcls": acls.handle_delete_acls,
    "DescribeConfigs": describe_configs.handle_describe_configs,
    "SaslAuthenticate": sasl.handle_sasl_authenticate,
    "AlterConfigs": configs.handle_alter_configs,
    "CreatePartitions": topics.handle_create_partitions,
    "DeleteGroups": groups.handle_delete_groups,
    "IncrementalAlterConfigs": configs.handle_alter_configs,
    "DescribeUserScramCredentials": sasl.handle_describe_user_scram_credentials,
    "AlterUserScramCredentials": sasl.handle_alter_user_scram_credentials,
    "DescribeCluster": metadata.handle_describe_cluster,
    "DescribeTransactions": txn.handle_describe_transactions,
    "ListTransactions": txn.handle_list_transactions,
}


# A request at the wrong node of a cluster: a coordinator's or the controller's request is
# answered NOT_COORDINATOR or NOT_CONTROLLER (broker/handlers/elsewhere.py), and clients look the
# coordinator or controller up again, as with Kafka. Those with an error per item check each
# item in their handlers. ACL, config and SCRAM credential changes, which Kafka takes at any
# broker, a follower puts in ZooKeeper for its master to write (Broker.write_security,
# ClusterTopics.change_topic). ListGroups and ListTransactions, which clients send to every node,
# are answered by a follower: with none; so is an idempotent producer's InitProducerId (ids come
# in blocks from ZooKeeper).

# What KafkaApis authorizes before the coordinator sees a keyed request (Kafka's order): a
# refused one goes to its handler, which answers the authorization error, not NOT_COORDINATOR.
KEY_AUTHORIZATION = {
    "OffsetFetch": ((Op.DESCRIBE, Res.GROUP, "group_id"),),
    "JoinGroup": ((Op.READ, Res.GROUP, "group_id"),),
    "Heartbeat": ((Op.READ, Res.GROUP, "group_id"),),
    "LeaveGroup": ((Op.READ, Res.GROUP, "group_id"),),
    "SyncGroup": ((Op.READ, Res.GROUP, "group_id"),),
    "ConsumerGroupHeartbeat": ((Op.READ, Res.GROUP, "group_id"),),
    "ShareGroupHeartbeat": ((Op.READ, Res.GROUP, "group_id"),),
    "InitProducerId": ((Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
    "AddPartitionsToTxn": ((Op.WRITE, Res.TRANSACTIONAL_ID, "v3_and_below_transactional_id"),),
    "AddOffsetsToTxn": ((Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"), (Op.READ, Res.GROUP, "group_id")),
    "EndTxn": ((Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
}


def _authorized(broker: Broker, request: Request) -> bool:
    return all(broker.permits(op, resource, getattr(request.body, field))
               for op, resource, field in KEY_AUTHORIZATION.get(request.spec.name, ()))


async def dispatch(broker: Broker, request: Request) -> Any:
    api = request.spec.name
    handler = HANDLERS.get(api)
    if handler is None:
        raise NotImplementedError(f"no handler for {api}")
    if api in elsewhere.REFUSALS:
        topology = broker.topology
        if elsewhere.REFUSALS[api][0] is None:  # the controller's: its group's master
            if not topology.leading or topology.draining:
                return elsewhere.refusal(request, ErrorCode.NOT_CONTROLLER)
        else:
            key = elsewhere.key_of(request)
            if key and not topology.coordinates(key) and _authorized(broker, request):
                return elsewhere.refusal(request, ErrorCode.NOT_COORDINATOR)
    return await handler(broker, request)
