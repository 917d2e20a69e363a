"""Produce and InitProducerId.

Per partition: validate the batch header (never the records), check the
idempotent producer's sequence, append to the store, then, in sync flush
mode, wait for the group commit without blocking the event loop. Produce v0-v2
may carry a message set of magic 0 or 1: it is rebuilt as a v2 batch first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import trio

from broker.broker import Broker
from broker.handlers.txn import fenced
from broker.net.answers import CloseUnanswered, Deferred
from broker.net.metrics import BrokerMetrics
from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.txn.producers import Verdict
from protocol.codec import Request
from protocol.errors import ErrorCode
from protocol.legacy_append import is_legacy, to_record_batch
from protocol.produce_response import RecordErrors, encode_produce_response
from protocol.record_batch import (
    CODEC_ZSTD,
    TRANSACTIONAL_BIT,
    InvalidBatch,
    stamp_log_append_time,
    validate_produce_head,
    validate_produce_records,
)
from store import AppendResult, BatchCrcMismatch, PipedBatch, TopicMeta, UnknownPartition, UnknownTopic
from store.records import decode

log = logging.getLogger("gregor.produce")
ZSTD_MIN_PRODUCE_VERSION = 7  # KIP-110: zstd needs Produce v7+ and Fetch v10+
MAGIC_2_PRODUCE_VERSION = 3  # below, records may be a message set of magic 0 or 1 (protocol/legacy_append.py)
_new_tuple = tuple.__new__


async def handle_produce(broker: Broker, request: Request):
    body = request.body
    version = request.header.api_version
    # Kafka keys partitions by (topic, partition): a partition listed twice keeps its last entry.
    wanted: dict[tuple[str, int], bytes | None] = {}
    for topic in body.topic_data:
        name = topic.name
        for index, records in topic.partition_data:
            wanted[(name, index)] = records
    results: dict[tuple[str, int], tuple] = {}
    handles = []
    durable: list[tuple[str, int, int]] = []  # the appends the flush handle covers
    refused: set[str] = set()
    if broker.authorizer is not None and body.transactional_id is not None and not broker.allowed(
            Op.WRITE, Res.TRANSACTIONAL_ID, body.transactional_id):
        # Kafka answers the whole request with the error
        results = {key: _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for key in wanted}
        return _unanswered(results) if body.acks == 0 else _response(version, results)
    if broker.authorizer is not None:  # Write on each topic, checked before anything else (KafkaApis)
        refused = {topic for topic, _ in wanted if not broker.allowed(Op.WRITE, Res.TOPIC, topic)}
    topology = broker.topology
    if body.acks not in (0, 1, -1):
        results = {key: _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED if key[0] in refused
                               else ErrorCode.INVALID_REQUIRED_ACKS) for key in wanted}
    else:
        # Check every partition's batch first, then append all that passed with one store
        # call (one hold of the append lock, one fsync handle); a request holds at most one
        # batch per partition, so no check depends on another partition's append.
        accepted = []
        results = dict.fromkeys(wanted)  # answers keep the request's order
        acks_all = body.acks == -1
        takes_writes = topology.takes_writes
        policies: dict[str, _TopicPolicy | None] = {}  # each topic's settings, looked up once per request
        for key, records in wanted.items():
            topic = key[0]
            if refused and topic in refused:
                results[key] = _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            if not takes_writes(*key):  # stale metadata or a clean stop: asks again
                results[key] = _error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            policy = policies.get(topic, _UNSEEN)
            if policy is _UNSEEN:
                policy = policies[topic] = _TopicPolicy.of(broker, topic, acks_all)
            if acks_all and topology.in_sync() < (1 if policy is None else policy.min_insync):
                results[key] = _error(ErrorCode.NOT_ENOUGH_REPLICAS)
                continue
            if version < MAGIC_2_PRODUCE_VERSION:  # converting old message sets is per-record work: off the loop
                checked = await trio.to_thread.run_sync(_check_one, broker, policy, topic, key[1], records, version,
                                                        body.transactional_id)
            else:
                checked = _check_one(broker, policy, topic, key[1], records, version, body.transactional_id)
            if checked.__class__ is tuple:
                results[key] = checked
            else:
                accepted.append(checked)
        if accepted:
            appended = broker.store.append_many([(a.topic, a.partition, a.batch, a.header) for a in accepted])
            handle, end_position = _record_appends(broker, accepted, appended, results, durable)
            if handle is not None:
                handles.append(handle)
            if durable:
                topology.appended()
    if body.acks == 0:
        return _unanswered(results)
    if body.acks == -1 and durable and not topology.holds(end_position):  # acks=all: the sync-state set must hold them
        return DurableResponse(version, results, durable, handles, broker.metrics,
                               replication=(topology, end_position, topology.leading_epoch, body.timeout_ms / 1000,
                                            [_min_insync(broker, topic) for topic, _, _ in durable]))
    if handles:
        return DurableResponse(version, results, durable, handles, broker.metrics)
    return _response(version, results)


@dataclass(slots=True)
class Acks0Refused(CloseUnanswered):
    """An acks=0 produce that failed for some partition: no answer is due, so the connection
    closes, and the client, seeing it close, refreshes its metadata and reconnects (Kafka's
    KafkaApis does the same). Without it, an acks=0 producer would keep writing to a node that
    is no longer the partition's leader, or stopping cleanly, and never learn of it."""

    errors: dict[tuple[str, int], str]

    def __str__(self) -> str:
        return "acks=0 produce failed: " + ", ".join(f"{t}-{p}: {e}" for (t, p), e in self.errors.items())


def _unanswered(results: dict[tuple[str, int], tuple]) -> Acks0Refused | None:
    errors = {key: getattr(result[0], "name", str(result[0])) for key, result in results.items()
              if result[0] != ErrorCode.NONE}
    return Acks0Refused(errors) if errors else None


def _min_insync(broker: Broker, topic: str) -> int:
    meta = broker.topic(topic)
    return 1 if meta is None else int(broker.topic_config(meta, "min.insync.replicas"))


@dataclass(slots=True)
class DurableResponse(Deferred):
    """A produce answer that may be sent only once its appends are fsynced (sync flush).
    The connection sends `body` in request order after `wait()`, and meanwhile keeps reading
    and appending the requests behind it, so one group commit covers many of them. The answer
    is encoded after the fsync: if it failed, every append it covered answers
    KAFKA_STORAGE_ERROR (and the store has gone offline), never NONE."""

    version: int
    results: dict[tuple[str, int], tuple]
    durable: list[tuple[str, int, int]]  # (topic, partition, log start) of the appends waited for
    handles: list
    metrics: BrokerMetrics | None
    # acks=all the sync-state set does not hold yet: (topology, commitlog end of the appends, the epoch they were
    # appended in, timeout in seconds, min.insync.replicas of each durable entry)
    replication: tuple | None = None
    body: Any = None

    async def wait(self) -> None:
        failed = None
        for handle in self.handles:
            await wait_durable(handle, self.metrics)
            failed = failed or handle.exception()
        if failed is not None:
            log.error("produce of %d batch(es) refused: the group-commit fsync failed: %s", len(self.durable), failed)
            for topic, partition, log_start in self.durable:
                self.results[(topic, partition)] = _error(ErrorCode.KAFKA_STORAGE_ERROR, log_start,
                                                          f"fsync failed, log directory offline: {failed}")
        elif self.replication is not None:
            topology, position, epoch, timeout_s, min_insync = self.replication
            error = await topology.await_replicated(position, epoch, timeout_s)
            for (topic, partition, log_start), needed in zip(self.durable, min_insync):
                code = error or (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if topology.in_sync() < needed else 0)
                if code and self.results[(topic, partition)][0] == ErrorCode.NONE:
                    self.results[(topic, partition)] = _error(code, log_start)
        self.body = _response(self.version, self.results)


def _error(code: ErrorCode, log_start: int = -1, message: str | None = None) -> tuple:
    return code, -1, -1, log_start, message


class _Accepted(NamedTuple):  # built with tuple.__new__ (a C call): one per partition of every produce
    """A partition's batch that passed its checks and goes to the store."""

    topic: str
    partition: int
    batch: bytes | bytearray
    header: Any
    append_time: int


@dataclass(slots=True)
class _TopicPolicy:
    """What the checks need of a topic's metadata and settings, looked up once per request
    (a wide request names one topic for hundreds of partitions)."""

    meta: TopicMeta
    view: bool  # a read-only view: produce is refused
    compacted: bool
    max_bytes: int
    log_append_time: bool
    min_insync: int  # looked up for acks=all only (else 1)

    @classmethod
    def of(cls, broker: Broker, topic: str, acks_all: bool) -> _TopicPolicy | None:
        meta = broker.topic(topic)
        if meta is None:
            return None
        return cls(meta, bool(meta.configs.get("view.source")), "compact" in meta.configs.get("cleanup.policy", ""),
                   broker.max_message_bytes(meta), broker.log_append_time(meta),
                   _min_insync(broker, topic) if acks_all else 1)


_UNSEEN = object()


def _check_one(broker: Broker, policy: _TopicPolicy | None, topic: str, partition: int, records: bytes | None,
               version: int, transactional_id: str | None = None):
    """The partition's answer if it is refused or a duplicate (a tuple), else an _Accepted."""
    if policy is None or not 0 <= partition < policy.meta.partitions:
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if policy.view:
        return _error(ErrorCode.INVALID_REQUEST, message=f"topic {topic} is a read-only view")
    compacted = policy.compacted
    max_bytes = policy.max_bytes
    piped = records.__class__ is PipedBatch  # its bytes wait in a pipe for the append (store/piped.py)
    if piped and (compacted or policy.log_append_time):  # these read or rewrite the records
        records, piped = records.materialize(), False
    try:
        if piped:
            try:  # every check but the CRC's, which the append makes from the page cache
                header = validate_produce_head(records.head, records.size, max_bytes)
            except InvalidBatch:  # Kafka's order of errors needs the whole batch
                records, piped = records.materialize(), False
        if not piped:
            if version < MAGIC_2_PRODUCE_VERSION and records is not None and is_legacy(records):
                records = to_record_batch(records, max_bytes, policy.meta.configs.get("compression.type", "producer"),
                                          policy.log_append_time, compacted)
                if records is None:  # no complete message: Kafka appends nothing and answers offset -1
                    return ErrorCode.NONE, -1, -1, _log_start(broker, topic, partition), None
            header = validate_produce_records(records, max_bytes)
    except InvalidBatch as exc:
        # Kafka answers a refused batch with no message and log_start_offset -1; the reason goes to the log.
        log.info("refused batch for %s-%d: %s", topic, partition, exc)
        return _error(exc.error_code, _log_start(broker, topic, partition) if exc.record_level else -1)
    answer = _after_header(broker, policy, topic, partition, records, header, version, transactional_id)
    if piped and answer.__class__ is tuple:  # answered without an append: Kafka checks the CRC before these
        return _crc_first(records, max_bytes) or answer
    return answer


def _after_header(broker: Broker, policy: _TopicPolicy, topic: str, partition: int, records, header,
                  version: int, transactional_id: str | None):
    """_check_one's checks after the batch header's: the answer (a tuple) or an _Accepted."""
    if MAGIC_2_PRODUCE_VERSION <= version < ZSTD_MIN_PRODUCE_VERSION and header.compression == CODEC_ZSTD:
        return _error(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)  # Kafka checks Produce v3-v6 only
    if policy.compacted:  # per-record work only for compacted topics
        keyless = _keyless(records)
        if keyless:  # every one listed, the message showing the first three (Kafka's LogValidator)
            why = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in keyless[:3])
            return _error(ErrorCode.INVALID_RECORD, _log_start(broker, topic, partition), RecordErrors.of(
                f"One or more records have been rejected due to {len(keyless)} record errors in total, and only "
                f"showing the first three errors at most: [{shown}]", [(i, why) for i in keyless]))  # Kafka 3.9's
    # KIP-890: the partition must be in the producer's transaction, when this node coordinates it
    # (a transaction of another broker group's coordinator is not verified, as before Kafka 3.6)
    if header.attributes & TRANSACTIONAL_BIT and (transactional_id is None
                                                  or broker.topology.coordinates(transactional_id)):
        error = broker.txn.state.verify(header.producer_id, header.producer_epoch, topic, partition)
        if error:
            return _error(error, _log_start(broker, topic, partition))
    if header.producer_id >= 0:  # an idempotent producer: its sequence (no check is made of the others')
        check = broker.producers.check(topic, partition, header)
        if check.verdict is Verdict.REJECT:
            return _error(check.error, _log_start(broker, topic, partition))
        if check.verdict is Verdict.DUPLICATE:
            dup = check.duplicate_of
            return ErrorCode.NONE, dup.base_offset, dup.max_timestamp, _log_start(broker, topic, partition), None
    append_time = -1
    batch = records
    if policy.log_append_time:
        append_time = int(time.time() * 1000)
        batch = bytearray(records)
        stamp_log_append_time(batch, append_time)
    return _new_tuple(_Accepted, (topic, partition, batch, header, append_time))


def _crc_first(batch: PipedBatch, max_bytes: int) -> tuple | None:
    """Before a piped batch is answered without an append (a refusal, a duplicate), its CRC,
    which Kafka checks before those: the CORRUPT_MESSAGE answer if it fails, else None."""
    try:
        validate_produce_records(batch.materialize(), max_bytes)
    except InvalidBatch as exc:
        log.info("refused batch: %s", exc)
        return _error(exc.error_code)
    return None


def _log_start(broker: Broker, topic: str, partition: int) -> int:
    """For an answer given before the append (a refusal, a duplicate); an appended batch's comes
    with its AppendResult, read under the append lock."""
    return broker.store.log_start_offset(topic, partition)


def _keyless(records: bytes) -> list[int]:
    """Indexes in the batch of the records without a key (Kafka's LogValidator refuses each such
    record on a compacted topic, and lists them all)."""
    return [i for i, record in enumerate(decode(records)) if record.key is None]


def _record_appends(broker: Broker, accepted: list[_Accepted], appended: list, results: dict, durable: list):
    """Each partition's answer from its store result, into `results`; the appended ones, also into
    `durable` (topic, partition, log start). Returns (the flush handle of the appends or None, the
    commitlog end of the last)."""
    handle = end_position = None  # one flush handle covers every batch of the call (sync mode)
    record = broker.producers.record
    for a, result in zip(accepted, appended):
        topic, partition, _, header, append_time = a
        if result.__class__ is not AppendResult:
            results[(topic, partition)] = _not_appended(broker, a, result)
            continue
        if header.producer_id >= 0:  # an idempotent producer's batch: its sequence is remembered
            record(topic, partition, header, result.base_offset)
        log_start = result.log_start_offset
        results[(topic, partition)] = (ErrorCode.NONE, result.base_offset, append_time, log_start, None)
        handle = result.flush
        durable.append((topic, partition, log_start))
        end_position = result.end_position
    return handle, end_position


def _not_appended(broker: Broker, a: _Accepted, result: Exception) -> tuple:
    """The answer of a partition the store refused (its StoreError)."""
    if isinstance(result, (UnknownTopic, UnknownPartition)):  # deleted by another client since the check
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if result.__class__ is BatchCrcMismatch:  # a piped batch, checked from the page cache
        log.info("refused batch for %s-%d: %s", a.topic, a.partition, result)
        return _error(ErrorCode.CORRUPT_MESSAGE)
    return _error(ErrorCode.KAFKA_STORAGE_ERROR, broker.store.log_start_offset(a.topic, a.partition),
                  str(result))  # StorageFull included


async def wait_durable(handle, metrics: BrokerMetrics | None = None) -> None:
    """Await a store FlushHandle: the flusher thread wakes this task through the trio token."""
    if handle.done():
        return
    event = trio.Event()
    token = trio.lowlevel.current_trio_token()
    handle.add_done_callback(lambda *_: token.run_sync_soon(event.set))
    started = time.perf_counter()
    await event.wait()
    if metrics is not None:
        metrics.flush_wait.observe(time.perf_counter() - started)


def _response(version: int, results: dict[tuple[str, int], tuple]) -> bytes:
    """The encoded body (protocol.produce_response: the hot path skips kafka-python's object tree)."""
    by_topic: dict[str, list] = {}
    last = parts = None
    for (topic, partition), (error, base_offset, append_time, log_start, message) in results.items():
        if topic != last:  # a request's partitions come topic by topic
            parts = by_topic.setdefault(topic, [])
            last = topic
        parts.append((partition, error, base_offset, append_time, log_start, message))
    return encode_produce_response(version, list(by_topic.items()))


async def handle_init_producer_id(broker: Broker, request: Request):
    body = request.body
    cls = request.spec.response
    version = request.header.api_version
    if body.transactional_id is not None:
        if not broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, body.transactional_id):
            return cls[version](throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                producer_id=-1, producer_epoch=-1)
        hint = (body.producer_id, body.producer_epoch) if version >= 3 else (-1, -1)
        answer = await broker.txn.init_producer_id(body.transactional_id, body.transaction_timeout_ms, *hint)
        error = fenced(answer.error, version, first_fenced_version=4)
        ok = error == ErrorCode.NONE
        return cls[version](throttle_time_ms=0, error_code=error, producer_id=answer.producer_id if ok else -1,
                            producer_epoch=answer.producer_epoch if ok else -1)
    if not (broker.allowed(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)
            or broker.allowed_any(Op.WRITE, Res.TOPIC)):  # KIP-679: Write on any topic will do
        return cls[version](throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            producer_id=-1, producer_epoch=-1)
    producer_id = await trio.to_thread.run_sync(broker.producers.allocate_producer_id)
    return cls[version](throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0)
