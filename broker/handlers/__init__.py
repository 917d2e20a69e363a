"""Request dispatch: api key -> handler coroutine. Each handler takes the
broker and the decoded request and returns a kafka-python response body, or
None when the protocol says no response (Produce with acks=0)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.broker import Broker
from broker.handlers import acls, api_versions, configs, fetch, groups, metadata, produce, sasl, topics, txn
from protocol.codec import MalformedRequest, Request

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


# What only a broker group's master answers (it alone writes the commitlog): group and
# transaction coordination, and every change of topics, configs, ACLs and credentials. Clients
# send these to the coordinator FindCoordinator names and the controller Metadata names, both the
# master; one that reaches a follower (stale metadata during a failover) has its connection
# closed, and the client looks the coordinator or controller up again. ListGroups and
# ListTransactions, which clients send to every node, are answered by a follower: with none;
# so is an idempotent producer's InitProducerId (ids come in blocks from ZooKeeper).
MASTER_ONLY = frozenset({8, 9, 11, 12, 13, 14, 15, 19, 20, 21, 24, 25, 26, 27, 28, 30, 31, 33, 37, 42, 44, 51,
                         65})


# Requests of one consumer group or transactional id (the key FindCoordinator was asked for): with
# several broker groups, only the master of the key's group answers them (broker/cluster.py).
KEYED = {8: "group_id", 9: "group_id", 11: "group_id", 12: "group_id", 13: "group_id", 14: "group_id",
         22: "transactional_id", 24: "transactional_id", 25: "transactional_id", 26: "transactional_id",
         28: "group_id"}  # TxnOffsetCommit: to the consumer group's coordinator, as Kafka's clients send it


class NotMaster(MalformedRequest):
    """A request only a master answers reached a follower, or a key another group coordinates
    reached this master: the connection closes and the client looks its coordinator up again."""


async def dispatch(broker: Broker, request: Request) -> Any:
    handler = HANDLERS.get(request.header.api_key)
    if handler is None:
        raise NotImplementedError(f"no handler for {request.spec.name}")
    cluster = broker.cluster
    key = getattr(request.body, KEYED.get(request.header.api_key, ""), None)
    if cluster is not None and (key or request.header.api_key in MASTER_ONLY):
        if not cluster.leading:
            raise NotMaster(f"{request.spec.name} reached node {broker.node_id}, a follower; the master is "
                            f"node {cluster.master}")
        if key and not cluster.coordinates(key):
            raise NotMaster(f"{request.spec.name} for {key!r} reached node {broker.node_id}; node "
                            f"{cluster.coordinator(key)} coordinates it")
    return await handler(broker, request)
