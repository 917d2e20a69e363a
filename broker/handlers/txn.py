"""The transactional requests (issue 19): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, DescribeTransactions and ListTransactions; InitProducerId with a transactional id
is in produce.py. Kafka's authorization and error mapping; every decision is broker/txn/state.py's,
carried out by broker/txn/coordinator.py.
"""

from __future__ import annotations

from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.broker import Broker
from broker.txn.coordinator import now_ms
from broker.txn.state import OFFSETS_MARKER
from protocol.codec import Request
from protocol.errors import ErrorCode
from store import StoreError, UnknownPartition, UnknownTopic


def fenced(error: int, version: int, first_fenced_version: int = 2) -> int:
    """Kafka answers PRODUCER_FENCED only to clients new enough to know it."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


async def handle_add_partitions_to_txn(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    Topic = cls.AddPartitionsToTxnTopicResult
    Part = Topic.AddPartitionsToTxnPartitionResult
    tid, pid, epoch = body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    if not broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, tid):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        for topic, partition in wanted:
            meta = broker.topic(topic)
            if not broker.allowed(Op.WRITE, Res.TOPIC, topic):
                errors[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= partition < meta.partitions or meta.configs.get("view.source"):
                errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if errors:  # Kafka adds none of them when one is refused
            errors = {key: errors.get(key, ErrorCode.OPERATION_NOT_ATTEMPTED) for key in wanted}
        else:
            answer = await broker.txn.change(lambda now: broker.txn.state.add_partitions(tid, pid, epoch, wanted, now))
            errors = dict.fromkeys(wanted, fenced(answer.error, version))
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(Part(partition_index=partition, partition_error_code=error))
    return cls[version](throttle_time_ms=0, results_by_topic_v3_and_below=[
        Topic(name=topic, results_by_partition=parts) for topic, parts in by_topic.items()])


async def handle_add_offsets_to_txn(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    if not broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, body.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        answer = await broker.txn.change(lambda now: broker.txn.state.add_offsets(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id, now))
        error = fenced(answer.error, version)
        if error == ErrorCode.NONE and await broker.replicated():  # the markers, replicated before the answer
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return request.spec.response[version](throttle_time_ms=0, error_code=error)


async def handle_end_txn(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    if not broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, body.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        answer = await broker.txn.change(lambda now: broker.txn.state.end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed, now))
        error = fenced(answer.error, version)
    return request.spec.response[version](throttle_time_ms=0, error_code=error)


async def handle_txn_offset_commit(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    Topic = cls.TxnOffsetCommitResponseTopic
    Part = Topic.TxnOffsetCommitResponsePartition
    wanted = [(t.name, p) for t in body.topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    if not broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, body.transactional_id):
        errors = {(t, p.partition_index): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t, p in wanted}
    elif not broker.allowed(Op.READ, Res.GROUP, body.group_id):
        errors = {(t, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED for t, p in wanted}
    else:
        offsets = []
        for topic, p in wanted:
            meta = broker.topic(topic)
            if not broker.allowed(Op.READ, Res.TOPIC, topic):
                errors[(topic, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partitions:
                errors[(topic, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets.append((topic, p.partition_index, p.committed_offset, p.committed_metadata,
                                p.committed_leader_epoch if version >= 2 else -1))
        if offsets:
            if not broker.coordinates(body.group_id):  # sent to the consumer group's coordinator, as by Kafka's clients
                error = ErrorCode.NOT_COORDINATOR
            elif broker.coordinates(body.transactional_id):
                error = await broker.txn.commit_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                                        body.group_id, offsets)
            else:  # another broker group's master coordinates the transaction: its marker commits these
                # (broker/txn/coordinator.py)
                error = broker.txn.stage_group_offsets(body.producer_id, body.producer_epoch, body.group_id, offsets)
            error = fenced(error, version)
            for topic, partition, *_ in offsets:
                errors[(topic, partition)] = error
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(Part(partition_index=partition, error_code=error))
    return cls[version](throttle_time_ms=0, topics=[Topic(name=t, partitions=parts) for t, parts in by_topic.items()])


async def handle_describe_transactions(broker: Broker, request: Request):
    cls = request.spec.response
    State = cls.TransactionState
    states = []
    for tid in request.body.transactional_ids:
        txn = broker.txn.describe(tid)
        if not broker.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, tid):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not broker.coordinates(tid):
            error = ErrorCode.NOT_COORDINATOR
        elif txn is None:
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        else:
            error = 0
        if error:
            states.append(State(error_code=error, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                                transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(State(error_code=0, transactional_id=tid, transaction_state=txn.state.value,
                            transaction_timeout_ms=txn.timeout_ms, transaction_start_time_ms=txn.start_ms,
                            producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
                            topics=[State.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return cls[request.header.api_version](throttle_time_ms=0, transaction_states=states)


async def handle_list_transactions(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    cls = request.spec.response
    known = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
             "PrepareEpochFence"}
    wanted_states = set(body.state_filters)
    pids = set(body.producer_id_filters)
    min_duration = body.duration_filter if version >= 1 else -1
    now = now_ms()
    listed = []
    following = not broker.topology.leading  # clients ask every node
    for txn in [] if following else broker.txn.listing():
        if wanted_states and txn.state.value not in wanted_states:
            continue
        if pids and txn.producer_id not in pids:
            continue
        if min_duration >= 0 and (txn.start_ms < 0 or now - txn.start_ms < min_duration):
            continue
        if not broker.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, txn.transactional_id):
            continue
        listed.append(cls.TransactionState(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                                           transaction_state=txn.state.value))
    return cls[version](throttle_time_ms=0, error_code=0,
                        unknown_state_filters=sorted(wanted_states - known), transaction_states=listed)


async def handle_write_txn_markers(broker: Broker, request: Request):
    """WriteTxnMarkers (inter-broker): the transaction coordinator of another broker group asks
    this master to end a producer's transaction in partitions of its group (Kafka's coordinator
    sends the same request to each partition leader). Answered once the sync-state set holds
    the markers."""
    body = request.body
    cls = request.spec.response
    Marker = cls.WritableTxnMarkerResult
    Topic = Marker.WritableTxnMarkerTopicResult
    Part = Topic.WritableTxnMarkerPartitionResult
    allowed = broker.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
    answers = []
    for m in body.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                parts.append(Part(partition_index=p, error_code=_marker(broker, allowed, m, t.name, p)))
            topics.append(Topic(name=t.name, partitions=parts))
        answers.append((m.producer_id, topics))
    if any(part.error_code == ErrorCode.NONE for _, topics in answers for t in topics for part in t.partitions):
        failed = await broker.replicated()
        if failed:
            for _, topics in answers:
                for t in topics:
                    for part in t.partitions:
                        part.error_code = part.error_code or failed
    return cls[request.header.api_version](markers=[Marker(producer_id=pid, topics=topics) for pid, topics in answers])


def _marker(broker: Broker, allowed: bool, marker, topic: str, partition: int) -> int:
    if not allowed:
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if (topic, partition) == OFFSETS_MARKER:  # the transaction's offsets of consumer groups this master coordinates
        if not broker.topology.leading or broker.topology.draining:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        try:
            broker.txn.complete_group_offsets(marker.producer_id, marker.producer_epoch, marker.transaction_result)
        except StoreError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE
    if not broker.topology.takes_writes(topic, partition):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    try:
        broker.store.append_control(topic, partition, marker.producer_id, marker.producer_epoch,
                                    marker.transaction_result, marker.coordinator_epoch)
    except (UnknownTopic, UnknownPartition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except StoreError:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE
