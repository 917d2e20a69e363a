"""Kafka's answers to a request that reached the wrong node of a cluster: a consumer group's or
transactional id's request at a node that does not coordinate it (a follower, or the master of
another broker group) is answered NOT_COORDINATOR, and a topic change at a follower
NOT_CONTROLLER, each in the shape of that API's error response (Kafka's getErrorResponse, with
the fields its coordinator and controller set). Clients then look the coordinator or controller
up again, as they do with Kafka. Requests with one error per item (OffsetCommit,
TxnOffsetCommit, OffsetFetch v8+, DescribeGroups, DeleteGroups, DescribeTransactions,
DeleteRecords, WriteTxnMarkers) are answered by their handlers, item by item, after their
authorization checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.codec import Request
from protocol.errors import ErrorCode

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER


def _item(cls, field: str):
    """The class of one element of the response's array `field`."""
    return cls.fields[field].data_class


def _offset_fetch(request: Request, error: int) -> Any:
    cls, version = request.spec.response, request.header.api_version
    if version >= 2:  # v2-7: the error is the request's, and no partitions
        return cls[version](throttle_time_ms=0, error_code=error, topics=[])
    Topic = _item(cls, "topics")
    Partition = _item(Topic, "partitions")
    return cls[version](topics=[Topic(name=t.name, partitions=[
        Partition(partition_index=i, committed_offset=-1, metadata="", error_code=error)
        for i in t.partition_indexes]) for t in request.body.topics or []])


def _join_group(request: Request, error: int) -> Any:
    version = request.header.api_version
    return request.spec.response[version](throttle_time_ms=0, error_code=error, generation_id=-1,
                                          protocol_type=None, protocol_name=None if version >= 7 else "",
                                          leader="", skip_assignment=False, member_id=request.body.member_id,
                                          members=[])


def _consumer_group_heartbeat(request: Request, error: int) -> Any:
    return request.spec.response[request.header.api_version](
        throttle_time_ms=0, error_code=error, error_message=None, member_id=None, member_epoch=-1,
        heartbeat_interval_ms=0, assignment=None)


def _error_only(request: Request, error: int) -> Any:
    return request.spec.response[request.header.api_version](throttle_time_ms=0, error_code=error)


def _init_producer_id(request: Request, error: int) -> Any:
    return request.spec.response[request.header.api_version](throttle_time_ms=0, error_code=error, producer_id=-1,
                                                             producer_epoch=-1)


def _add_partitions_to_txn(request: Request, error: int) -> Any:
    cls = request.spec.response
    Topic = _item(cls, "results_by_topic_v3_and_below")
    Partition = _item(Topic, "results_by_partition")
    return cls[request.header.api_version](throttle_time_ms=0, results_by_topic_v3_and_below=[
        Topic(name=t.name, results_by_partition=[Partition(partition_index=p, partition_error_code=error)
                                                 for p in t.partitions])
        for t in request.body.v3_and_below_topics])


def _create_topics(request: Request, error: int) -> Any:
    cls = request.spec.response
    Topic = _item(cls, "topics")
    return cls[request.header.api_version](throttle_time_ms=0, topics=[
        Topic(name=t.name, error_code=error, error_message=None) for t in request.body.topics])


def _delete_topics(request: Request, error: int) -> Any:
    cls, version = request.spec.response, request.header.api_version
    Result = _item(cls, "responses")
    if version >= 6:
        results = [Result(name=t.name, topic_id=t.topic_id, error_code=error, error_message=None)
                   for t in request.body.topics]
    else:
        results = [Result(name=name, error_code=error, error_message=None) for name in request.body.topic_names]
    return cls[version](throttle_time_ms=0, responses=results)


def _create_partitions(request: Request, error: int) -> Any:
    cls = request.spec.response
    Result = _item(cls, "results")
    return cls[request.header.api_version](throttle_time_ms=0, results=[
        Result(name=t.name, error_code=error, error_message=None) for t in request.body.topics])


# api key -> (the request's key field, or None for the controller's requests; the answer)
REFUSALS: dict[str, tuple[str | None, Callable[[Request, int], Any]]] = {  # by API name
    "OffsetFetch": ("group_id", _offset_fetch),  # v1-7 (v8+ names several groups: its handler answers each)
    "JoinGroup": ("group_id", _join_group),
    "Heartbeat": ("group_id", _error_only),  # Heartbeat
    "LeaveGroup": ("group_id", _error_only),  # LeaveGroup (v3+: no members)
    "SyncGroup": ("group_id", _error_only),  # SyncGroup (no protocol, no assignment)
    "ConsumerGroupHeartbeat": ("group_id", _consumer_group_heartbeat),
    "ShareGroupHeartbeat": ("group_id", _consumer_group_heartbeat),  # the same fields
    "InitProducerId": ("transactional_id", _init_producer_id),  # only with a transactional id: an idempotent producer's anywhere
    "AddPartitionsToTxn": ("v3_and_below_transactional_id", _add_partitions_to_txn),
    "AddOffsetsToTxn": ("transactional_id", _error_only),  # AddOffsetsToTxn
    "EndTxn": ("transactional_id", _error_only),  # EndTxn
    "CreateTopics": (None, _create_topics),
    "DeleteTopics": (None, _delete_topics),
    "CreatePartitions": (None, _create_partitions),
}


def key_of(request: Request) -> str | None:
    """The coordinator key of a request REFUSALS answers by key (None: it has none)."""
    field = REFUSALS[request.spec.name][0]
    if field is None or (request.spec.name == "OffsetFetch" and request.header.api_version >= 8):
        return None
    return getattr(request.body, field)


def refusal(request: Request, error: int) -> Any:
    return REFUSALS[request.spec.name][1](request, error)
