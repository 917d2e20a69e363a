"""Fetch (with long polling and incremental fetch sessions): Kafka's handleFetchRequest.

Fetch returns whole stored batches from the batch containing the fetch offset; KIP-74 lets the
first batch of the response exceed the limits. With nothing to return, it waits for an append to
any requested partition or for max_wait_ms, whichever comes first. Which partitions a request
reads, and which of them its answer carries, is the fetch session's to say
(broker/fetch_sessions.py). From v13 topics are named by id. Fetch v0-v3 answers with the
batches down-converted to message format v0/v1 (protocol/down_convert.py); from v4 on the stored
bytes go out untouched, as memoryviews over the commitlog: this module never copies or parses a
batch beyond its header.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable

import trio

from broker.broker import Broker
from broker.fetch_sessions import TOPIC_IDS_FROM, FetchPartition, PartitionKey
from broker.handlers.metadata import live_nodes
from broker.security.acl import Op, Res
from broker.views.definition import TAG_HEADER, data_topic, view_of
from broker.views.fetch import read_view
from protocol import down_convert
from protocol.codec import Request
from protocol.errors import ErrorCode
from protocol.fetch_request import FetchTopic
from protocol.fetch_response import NodeEndpoint, PartitionResult, encode_fetch_response, error_partition
from protocol.record_batch import ATTRIBUTES_OFFSET, CODEC_MASK, CODEC_ZSTD
from store import CorruptData, OffsetOutOfRange, UnknownPartition, UnknownTopic

READ_COMMITTED = 1  # isolation_level: read_committed stops at the last stable offset
_BASE = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")
ZSTD_MIN_FETCH_VERSION = 10
LEADER_IN_ANSWER_FROM = 16  # KIP-951: a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the leader
_LEADER_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

_new_tuple = tuple.__new__
ZERO_ID = uuid.UUID(int=0)  # kafka-python decodes the all-zero topic id as None
Answer = tuple[PartitionKey, str | None, PartitionResult]  # (key, topic name, result)


def epoch_error(broker: Broker, topic: str, partition: int, current_leader_epoch: int,
                replica_reads: bool = False) -> int:
    """Kafka's check of the leader epoch a client last saw (KIP-320): -1 skips it; an older
    one is FENCED_LEADER_EPOCH (refresh metadata), a newer one UNKNOWN_LEADER_EPOCH (this
    broker has not caught up with it yet). In a cluster, a node that is not the master of the
    partition's broker group answers NOT_LEADER_OR_FOLLOWER: clients read from that master;
    with `replica_reads` (a consumer's Fetch v11 or later: KIP-392) a follower of the group
    answers too, checking the epoch against its group's master epoch."""
    topology = broker.topology
    follower = not topology.leads(topic, partition)
    if follower and not (replica_reads and topology.serves_reads(topic, partition)):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch < 0:
        return ErrorCode.NONE
    epoch = topology.epoch if follower else broker.store.leader_epoch(topic, partition)
    if current_leader_epoch == epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


def fetch_data(body, version: int, name_of: Callable[[uuid.UUID], str | None]) -> dict[PartitionKey, FetchPartition]:
    """The request's partitions, keyed by (topic name, or id from v13; partition); a partition
    listed twice counts once, with its last parameters (Kafka's LinkedHashMap)."""
    by_id = version >= TOPIC_IDS_FROM
    epochs = version >= 9
    data: dict[PartitionKey, FetchPartition] = {}
    for t in body.topics:
        ref = (t.topic_id or ZERO_ID) if by_id else t.topic
        name = name_of(ref) if by_id else ref
        if t.__class__ is FetchTopic:  # the C decoder's tuples, with the defaults of a version's absent fields
            for partition, leader_epoch, offset, last_epoch, log_start, max_bytes in t.partitions:
                data[(ref, partition)] = FetchPartition(name, offset, max_bytes, leader_epoch, log_start, last_epoch)
            continue
        for p in t.partitions:
            data[(ref, p.partition)] = FetchPartition(
                name, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch if epochs else -1,
                p.log_start_offset if version >= 5 else -1, p.last_fetched_epoch if version >= 12 else -1)
    return data


def forgotten(body, version: int) -> list[PartitionKey]:
    if version < 7:
        return []
    by_id = version >= TOPIC_IDS_FROM
    return [((t.topic_id or ZERO_ID) if by_id else t.topic, p) for t in body.forgotten_topics_data
            for p in t.partitions]


async def handle_fetch(broker: Broker, request: Request):
    """The answer is a list of buffers (protocol.fetch_response): record batches stay memoryviews
    over the commitlog until the connection writes them with writev."""
    body = request.body
    version = request.header.api_version
    name_of = broker.store.topic_name
    session_id, epoch = (body.session_id, body.session_epoch) if version >= 7 else (0, -1)
    replica = body.replica_id if version < 15 else getattr(body.replica_state, "replica_id", -1)
    context = broker.fetch_sessions.new_context(version, session_id, epoch, fetch_data(body, version, name_of),
                                                forgotten(body, version), replica >= 0, _now_ms())
    if context.error:
        return encode_fetch_response(version, [], error_code=context.error)
    partitions = list(context.partitions.items())
    if version >= TOPIC_IDS_FROM:  # a topic created since the session learnt of its id
        for (ref, _), part in partitions:
            if part.topic is None:
                part.topic = name_of(ref)
    erroneous, readable = _check(broker, partitions)
    deadline = None
    while True:
        if version <= down_convert.LAST_VERSION:  # down-conversion is per-record work: off the event loop
            answers, size, has_error = await trio.to_thread.run_sync(_read_all, broker, body, version, readable)
        else:
            answers, size, has_error = _read_all(broker, body, version, readable)
        if size >= body.min_bytes or has_error or not readable:
            break
        if deadline is None:  # the wait, counted from after the first read as Kafka's DelayedFetch counts it
            deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
            topics_now = broker.store.topics()
            sources = {name: data_topic(topics_now, name) for name in {part.topic for _, part in readable}}
            keys = [(sources[part.topic], key[1]) for key, part in readable]
        if trio.current_time() >= deadline:
            break
        event = trio.Event()
        broker.appends.register(keys, event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            broker.appends.unregister(keys, event)
    answers += erroneous  # Kafka answers the partitions it could not read after those it read
    if context.sessionless:  # every partition answered: no per-partition summary to build
        return _encode(broker, version, answers, ErrorCode.NONE, 0)
    error, session_id, kept = context.respond(
        [(key, r.error_code, r.high_watermark, r.log_start_offset, bool(r.records), r.preferred_read_replica)
         for key, _, r in answers], _now_ms())
    return _encode(broker, version, [answers[i] for i in kept], error, session_id)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _check(broker: Broker, partitions: list[tuple[PartitionKey, FetchPartition]]):
    """Kafka's checks before a read: an unknown topic id, no Read on the topic, an unknown topic
    or partition; (answers for those, the partitions to read)."""
    erroneous: list[Answer] = []
    refused: list[Answer] = []
    readable = []
    counts: dict[str, int] = {}  # name -> its partition count; -1: not allowed to read it
    for key, part in partitions:
        name = part.topic
        if name is None:
            erroneous.append((key, None, error_partition(key[1], ErrorCode.UNKNOWN_TOPIC_ID, aborted=[])))
            continue
        count = counts.get(name)
        if count is None:  # Read on each topic; a view is a topic of its own name
            meta = broker.topic(name)
            allowed = broker.authorizer is None or broker.allowed(Op.READ, Res.TOPIC, name)
            count = counts[name] = -1 if not allowed else 0 if meta is None else meta.partitions
        if count < 0:
            refused.append((key, name, error_partition(key[1], ErrorCode.TOPIC_AUTHORIZATION_FAILED, aborted=[])))
            continue
        if not 0 <= key[1] < count:
            refused.append((key, name, error_partition(key[1], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, aborted=[])))
            continue
        readable.append((key, part))
    return erroneous + refused, readable


def _preferred_replica(broker: Broker, body, version: int) -> int:
    """KIP-392: the follower a master sends this consumer to (its client.rack, Fetch v11's
    rack_id, is that follower's broker.rack), with replica.selector.class set; -1: read here."""
    if version < 11 or not broker.config["replica.selector.class"]:
        return -1
    return broker.topology.preferred_read_replica(body.rack_id or "")


def _read_all(broker: Broker, body, version: int, partitions: list[tuple[PartitionKey, FetchPartition]]):
    """Read each partition in turn within the request's limits: (answers, bytes read, whether a
    partition answered an error, which ends the wait)."""
    committed = version >= 4 and body.isolation_level == READ_COMMITTED
    preferred = _preferred_replica(broker, body, version)
    remaining = body.max_bytes
    size = 0
    has_error = False
    answers: list[Answer] = []
    topics: dict[str, tuple] = {}  # name -> (the topic whose data it reads, its view or None, its id)
    # what most fetches are: a consumer of today's protocol, reading uncommitted at the master, of
    # a topic that is no view; read in the loop below without the checks that cannot apply and
    # without a call per step (this runs once per partition of every fetch)
    plain = version >= ZSTD_MIN_FETCH_VERSION and not committed and preferred < 0
    store = broker.store
    read, at_end, leads, leader_epoch = store.read, store.at_end, broker.topology.leads, store.leader_epoch
    append = answers.append
    for key, part in partitions:
        name = part.topic
        topic = topics.get(name)
        if topic is None:
            meta = broker.topic(name)
            view = view_of(meta)
            topic = topics[name] = (meta if view is None else broker.topic(view.source), view,
                                    None if meta is None else meta.topic_id)
        meta, view, topic_id = topic
        index = key[1]
        if topic_id is not None and key[0].__class__ is uuid.UUID and key[0] != topic_id:
            # a session's topic, by id, deleted and made again under its name: Kafka's read refuses it
            append((key, name, error_partition(index, ErrorCode.INCONSISTENT_TOPIC_ID)))
            has_error = True
            continue
        epoch = part.current_leader_epoch  # KIP-320: checked against this leader's (-1: not at all)
        if not plain or view is not None or meta is None or not 0 <= index < meta.partitions \
                or not leads(name, index) or (epoch >= 0 and epoch != leader_epoch(name, index)):
            # the checks that answer an error, and every other kind of read
            result, nbytes, matched = _read_one(broker, version, part, index, topic, committed, preferred,
                                                remaining, first=not size)
            if result.error_code or result.preferred_read_replica >= 0:
                has_error = True
            size += matched
            remaining -= nbytes
            append((key, name, result))
            continue
        # a session's partition read up to the high watermark its client was last told is likely
        # still there (most partitions of a wide incremental fetch): answered without the read's work
        offset = part.fetch_offset
        caught_up = at_end(name, index, offset) if offset == part.high_watermark else None
        if caught_up is not None:
            append((key, name, _new_tuple(PartitionResult, (index, 0, caught_up[0], caught_up[1], caught_up[2],
                                                            None, -1, [], None))))
            continue
        limit = min(part.max_bytes, remaining)
        try:
            result = read(name, index, offset, limit if limit > 0 else 1)
        except (UnknownTopic, UnknownPartition, OffsetOutOfRange, CorruptData) as exc:
            append((key, name, _read_error(store, name, index, exc)))
            has_error = True
            continue
        batches = result[0]
        if batches and size and (limit <= 0 or len(batches[0]) > limit):
            batches = []  # KIP-74 exempts only the response's first batch from the limits
        elif batches:
            nbytes = sum(map(len, batches))
            size += nbytes
            remaining -= nbytes
        append((key, name, _new_tuple(PartitionResult, (index, 0, result[1], result[3], result[2], None, -1, batches,
                                                        None))))
    return answers, size, has_error


def _read_one(broker: Broker, version: int, part: FetchPartition, index: int, topic: tuple, committed: bool,
              preferred: int, remaining: int, first: bool) -> tuple[PartitionResult, int, int]:
    """One partition's answer, the bytes it carries and those that count for min_bytes."""
    meta, view, _ = topic
    if meta is None or not 0 <= index < meta.partitions:  # deleted since the check
        return error_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, aborted=[]), 0, 0
    fenced = epoch_error(broker, meta.name, index, part.current_leader_epoch, replica_reads=version >= 11)
    if fenced:
        return error_partition(index, fenced), 0, 0
    store = broker.store
    if preferred >= 0 and broker.topology.leads(meta.name, index):
        # Kafka's leader reads nothing then and answers at once, naming the replica
        return PartitionResult(index, 0, store.high_watermark(meta.name, index),
                               store.last_stable_offset(meta.name, index), store.log_start_offset(meta.name, index),
                               [] if committed else None, preferred, []), 0, 0
    if version <= down_convert.LAST_VERSION and broker.topic_config(
            meta, "message.downconversion.enable") == "false":
        # Kafka's topic switch for consumers of message format v0/v1
        return _conversion_error(index, ErrorCode.UNSUPPORTED_VERSION), 0, 0
    if view is None and version > down_convert.LAST_VERSION:
        caught_up = store.at_end(part.topic, index, part.fetch_offset)
        if caught_up is not None:  # nothing to read: the answer without the read's work
            hw, lso, start = caught_up
            return PartitionResult(index, 0, hw, lso, start, [] if committed else None, -1, []), 0, 0
    limit = min(part.max_bytes, remaining)
    try:
        if view is None:
            result = store.read(part.topic, index, part.fetch_offset, max(limit, 1), committed)
        else:
            result = read_view(store, view, meta.configs[TAG_HEADER], index, part.fetch_offset, max(limit, 1))
    except (UnknownTopic, UnknownPartition, OffsetOutOfRange, CorruptData) as exc:
        return _read_error(store, meta.name, index, exc), 0, 0
    batches = result.batches
    if version <= down_convert.LAST_VERSION:  # per-record work, for these old consumers only
        batches = down_convert.down_convert(batches, down_convert.magic_for(version), part.fetch_offset,
                                            max(limit, 1))
        if batches is None:  # its first batch is zstd, which message format v0/v1 cannot carry
            return _conversion_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), 0, 0
    if not first and batches and (limit <= 0 or len(batches[0]) > limit):
        batches = []  # KIP-74 exempts only the response's first batch from the limits
    if down_convert.LAST_VERSION < version < ZSTD_MIN_FETCH_VERSION and any(
            b[ATTRIBUTES_OFFSET + 1] & CODEC_MASK == CODEC_ZSTD for b in batches):
        # a client this old cannot read zstd (Kafka answers the same)
        return error_partition(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), 0, 0
    nbytes = sum(map(len, batches))
    # a view's empty gap batches move consumers on but are not data for min_bytes
    matched = nbytes if view is None else result.matched_bytes
    hw = result.high_watermark
    # a view's reads end at its source's last stable offset (broker/views/fetch.py)
    lso = result.high_watermark if view is not None else result.last_stable_offset
    aborted = None  # read_uncommitted: Kafka sends a null list
    if committed:  # the aborted transactions the fetched batches may hold records of (KIP-98)
        end = (_BASE.unpack_from(batches[-1], 0)[0] + _LAST_DELTA.unpack_from(batches[-1], 23)[0] + 1
               if batches else part.fetch_offset)
        aborted = store.aborted_transactions(meta.name, index, part.fetch_offset, end)
    # tuple.__new__, a C call: the NamedTuple's own __new__ is a Python function
    return _new_tuple(PartitionResult, (index, 0, hw, lso, result.log_start_offset, aborted, -1, batches, None)), \
        nbytes, matched


def _read_error(store, topic: str, index: int, exc: Exception) -> PartitionResult:
    """The answer of a partition whose read raised."""
    if isinstance(exc, (UnknownTopic, UnknownPartition)):  # deleted by another client since the check
        return error_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, aborted=[])
    if isinstance(exc, OffsetOutOfRange):
        return error_partition(index, ErrorCode.OFFSET_OUT_OF_RANGE)
    # CorruptData: damaged at rest (found by the startup CRC check): an error, never garbage;
    # Java consumers raise it to the application, which may seek past the range
    return error_partition(index, ErrorCode.CORRUPT_MESSAGE, store.high_watermark(topic, index),
                           store.log_start_offset(topic, index))


def _conversion_error(partition: int, error_code: int) -> PartitionResult:
    """A partition Fetch v0-v3 cannot have: Kafka answers these with a null records field."""
    return error_partition(partition, error_code)._replace(records=None)


def _encode(broker: Broker, version: int, answers: list[Answer], error: int, session_id: int):
    """The answer's partitions grouped by topic as they come (Kafka starts a new topic entry
    whenever the topic changes); from v16 the leader of each partition that has moved."""
    topics: list[tuple[str | uuid.UUID, list[PartitionResult]]] = []
    leaders: set[int] = set()
    names_leaders = version >= LEADER_IN_ANSWER_FROM
    last = parts = None
    for key, name, result in answers:
        if names_leaders and result[1] in _LEADER_ERRORS and name is not None:  # [1]: its error code
            leader, leader_epoch = broker.topology.partition_view(name, key[1])[:2]
            result = result._replace(current_leader=(leader, leader_epoch))
            leaders.add(leader)
        if parts is None or key[0] != last:
            parts = []
            topics.append((key[0], parts))
            last = key[0]
        parts.append(result)
    nodes = [NodeEndpoint(node, host, port, rack) for node, host, port, rack in live_nodes(broker)
             if node in leaders and host is not None] if leaders else []
    return encode_fetch_response(version, topics, error_code=error, session_id=session_id, node_endpoints=nodes)
