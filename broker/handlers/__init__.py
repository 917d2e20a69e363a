"""Request dispatch: api key -> handler coroutine. Each handler takes the
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
    elsewhere,
    fetch,
    groups,
    metadata,
    produce,
    sasl,
    topics,
    txn,
)
from protocol.codec import Request
from protocol.errors import ErrorCode

Handler = Callable[[Broker, Request], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: produce.handle_produce,
    1: fetch.handle_fetch,
    2: fetch.handle_list_offsets,
    3: metadata.handle_metadata,
    8: groups.handle_offset_commit,
    9: groups.handle_offset_fetch,
    10: groups.handle_find_coordinator,
    11: groups.handle_join_group,
    12: groups.handle_heartbeat,
    13: groups.handle_leave_group,
    14: groups.handle_sync_group,
    15: groups.handle_describe_groups,
    16: groups.handle_list_groups,
    17: sasl.handle_sasl_handshake,
    18: api_versions.handle_api_versions,
    19: topics.handle_create_topics,
    20: topics.handle_delete_topics,
    21: configs.handle_delete_records,
    22: produce.handle_init_producer_id,
    23: fetch.handle_offset_for_leader_epoch,
    24: txn.handle_add_partitions_to_txn,
    25: txn.handle_add_offsets_to_txn,
    26: txn.handle_end_txn,
    27: txn.handle_write_txn_markers,
    28: txn.handle_txn_offset_commit,
    29: acls.handle_describe_acls,
    30: acls.handle_create_acls,
    31: acls.handle_delete_acls,
    32: topics.handle_describe_configs,
    36: sasl.handle_sasl_authenticate,
    33: configs.handle_alter_configs,
    37: topics.handle_create_partitions,
    42: groups.handle_delete_groups,
    44: configs.handle_alter_configs,
    50: sasl.handle_describe_user_scram_credentials,
    51: sasl.handle_alter_user_scram_credentials,
    60: metadata.handle_describe_cluster,
    65: txn.handle_describe_transactions,
    66: txn.handle_list_transactions,
}


def register(api_key: int, handler: Handler) -> None:
    HANDLERS[api_key] = handler


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
    9: ((Op.DESCRIBE, Res.GROUP, "group_id"),),
    11: ((Op.READ, Res.GROUP, "group_id"),),
    12: ((Op.READ, Res.GROUP, "group_id"),),
    13: ((Op.READ, Res.GROUP, "group_id"),),
    14: ((Op.READ, Res.GROUP, "group_id"),),
    22: ((Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
    24: ((Op.WRITE, Res.TRANSACTIONAL_ID, "v3_and_below_transactional_id"),),
    25: ((Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"), (Op.READ, Res.GROUP, "group_id")),
    26: ((Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
}


def _authorized(broker: Broker, request: Request) -> bool:
    return all(broker.permits(op, resource, getattr(request.body, field))
               for op, resource, field in KEY_AUTHORIZATION.get(request.header.api_key, ()))


async def dispatch(broker: Broker, request: Request) -> Any:
    api_key = request.header.api_key
    handler = HANDLERS.get(api_key)
    if handler is None:
        raise NotImplementedError(f"no handler for {request.spec.name}")
    cluster = broker.cluster
    if cluster is not None and api_key in elsewhere.REFUSALS:
        key = elsewhere.key_of(request)
        if elsewhere.REFUSALS[api_key][0] is None:  # the controller's: its group's master
            if not cluster.leading or cluster.draining:
                return elsewhere.refusal(request, ErrorCode.NOT_CONTROLLER)
        elif key and not cluster.coordinates(key) and _authorized(broker, request):
            return elsewhere.refusal(request, ErrorCode.NOT_COORDINATOR)
    return await handler(broker, request)
