"""Incremental fetch sessions (KIP-227): the session cache and the choice of a Fetch's context, as
Kafka's FetchSessionCache, FetchSessionCacheShard, FetchSession and FetchManager do them.

Sans-IO: every call takes `now_ms`; it never reads the store, sleeps or touches trio. The Fetch
handler (broker/handlers/fetch.py) asks `new_context` which partitions a request reads, reads
them, and hands the answers to `FetchContext.respond`, which keeps the session's view of what the
client knows and leaves out of an incremental answer every partition with nothing new.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SHARDS = 8  # Kafka's NumFetchSessionCacheShards: the slots are split evenly between them
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
TOPIC_IDS_FROM = 13  # Fetch v13 names topics by id; a session keeps the kind it began with
_MAX_INT = 2**31 - 1

PartitionKey = tuple[str | uuid.UUID, int]  # (topic name, or topic id from v13; partition)


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: the final epoch stays final, and the epoch wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT else epoch + 1


class FetchPartition:
    """One partition a fetch reads: the request's parameters and, in a session, the high watermark
    and log start offset the client was last told (Kafka's CachedPartition). A partition asked for
    by topic id whose id this broker does not know has topic None."""

    __slots__ = (
        "current_leader_epoch",
        "fetch_offset",
        "high_watermark",
        "last_fetched_epoch",
        "local_log_start_offset",
        "log_start_offset",
        "max_bytes",
        "topic",
    )

    def __init__(self, topic: str | None, fetch_offset: int, max_bytes: int, current_leader_epoch: int = -1,
                 log_start_offset: int = -1, last_fetched_epoch: int = -1) -> None:
        self.topic = topic
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.log_start_offset = log_start_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.high_watermark = -1
        self.local_log_start_offset = -1

    def update_request(self, other: FetchPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.log_start_offset = other.log_start_offset
        self.last_fetched_epoch = other.last_fetched_epoch

    def must_respond(self, error_code: int, high_watermark: int, log_start_offset: int, has_records: bool,
                     preferred_read_replica: int) -> bool:
        """Kafka's maybeUpdateResponseData: whether an incremental answer carries this partition
        (new records, a moved high watermark or log start, an error, a preferred replica), and
        remember what the client is told. An error sets the cached high watermark to -1, so the
        partition is sent again once the error clears."""
        respond = has_records or preferred_read_replica != -1
        if self.high_watermark != high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if self.local_log_start_offset != log_start_offset:
            respond = True
            self.local_log_start_offset = log_start_offset
        if error_code:
            self.high_watermark = -1
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool  # created by a follower; Gregor's followers replicate otherwise, so consumers' are not
    partitions: dict[PartitionKey, FetchPartition]  # in the order they are read, those with data last
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1  # the size the shard last indexed it under; -1: not in the cache
    # which newcomers may evict it, as decided when it was last used (Kafka's evictable trees)
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return self.privileged, self.cached_size, self.id


@dataclass(eq=False)
class CacheShard:
    """One of Kafka's FetchSessionCacheShards: its share of the slots and of the session ids."""
    number: int
    max_entries: int
    id_range: int
    sessions: dict[int, FetchSession] = field(default_factory=dict)

    def new_session_id(self) -> int:
        low, high = max(1, self.number * self.id_range), (self.number + 1) * self.id_range
        while True:
            session_id = random.randrange(low, high)
            if session_id not in self.sessions:
                return session_id

    def maybe_create(self, now_ms: int, privileged: bool, partitions: dict[PartitionKey, FetchPartition],
                     uses_topic_ids: bool) -> int:
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, len(partitions), now_ms):
            session = FetchSession(self.new_session_id(), privileged, partitions, uses_topic_ids, now_ms, now_ms,
                                   next_epoch(INITIAL_EPOCH))
            self.sessions[session.id] = session
            self.touch(session, now_ms)
            return session.id
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's tryEvict: the least recently used session if unused for EVICTION_MS; else the
        weakest evictable session if the newcomer outranks it (privileged over not, then more
        partitions; a tie keeps the session). Evictable, as of a session's last use: one over
        EVICTION_MS old, and for a privileged newcomer also any consumer's."""
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > EVICTION_MS:
            self.remove(stalest.id)
            return True
        evictable = [s for s in self.sessions.values()
                     if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not evictable:
            return False
        weakest = min(evictable, key=FetchSession.evictable_key)
        if (privileged, size, 0) < weakest.evictable_key():
            return False
        self.remove(weakest.id)
        return True

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > EVICTION_MS
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)


class FetchSessionCache:
    """Every incremental fetch session of this broker, in SHARDS shards of
    `max.incremental.fetch.session.cache.slots` / SHARDS slots each (below SHARDS slots, none);
    new sessions go to the shards in turn, and a session id names its shard."""

    def __init__(self, slots: int) -> None:
        id_range = _MAX_INT // SHARDS
        self.shards = [CacheShard(n, slots // SHARDS, id_range) for n in range(SHARDS)]
        self._turn = itertools.cycle(self.shards)

    def next_shard(self) -> CacheShard:
        """The shard a new session goes to: each in turn (Kafka's getNextCacheShard)."""
        return next(self._turn)

    def shard_of(self, session_id: int) -> CacheShard | None:
        number = session_id // self.shards[0].id_range
        return self.shards[number] if 0 <= number < SHARDS else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return None if shard is None else shard.sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        shard = self.shard_of(session_id)
        if shard is not None:
            shard.remove(session_id)

    def __len__(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    def new_context(self, version: int, session_id: int, epoch: int, fetch_data: dict[PartitionKey, FetchPartition],
                    forgotten: Iterable[PartitionKey], privileged: bool, now_ms: int) -> FetchContext:
        """Kafka's FetchManager.newContext. Epoch 0 or -1 is a full fetch: a session it names is
        closed, and epoch 0 asks for a new one. Any other epoch is incremental: the request lists
        only what changed (and what to forget) for the session it names."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(fetch_data)
            return FetchContext(fetch_data, cache=self, privileged=privileged,
                                uses_topic_ids=version >= TOPIC_IDS_FROM)
        shard = self.shard_of(session_id)
        session = None if shard is None else shard.sessions.get(session_id)
        if session is None:
            return FetchContext({}, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext({}, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= TOPIC_IDS_FROM):
            return FetchContext({}, error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        cached = session.partitions
        for key, wanted in fetch_data.items():
            known = cached.get(key)
            if known is None:
                cached[key] = wanted
            else:
                known.update_request(wanted)
        for key in forgotten:
            cached.pop(key, None)
        if not cached:
            shard.remove(session.id)
            return FetchContext(fetch_data)
        shard.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(cached, session=session, request_epoch=epoch)


class FetchContext:
    """What one Fetch reads and how its answer is shaped: an error (no partitions, session id 0),
    sessionless (every partition, session id 0), full (every partition; a new session if the
    cache has room), or incremental (the session's partitions; only those with news answered)."""

    __slots__ = ("_cache", "_privileged", "_request_epoch", "_session", "_uses_topic_ids", "error", "partitions")

    def __init__(self, partitions: dict[PartitionKey, FetchPartition], error: int = 0,
                 cache: FetchSessionCache | None = None, privileged: bool = False, uses_topic_ids: bool = False,
                 session: FetchSession | None = None, request_epoch: int = 0) -> None:
        self.partitions = partitions
        self.error = error
        self._cache = cache
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids
        self._session = session
        self._request_epoch = request_epoch

    @property
    def sessionless(self) -> bool:
        """Neither a session to update nor one to open: every partition read is answered."""
        return self._session is None and self._cache is None

    def respond(self, answers: list[tuple[PartitionKey, int, int, int, bool, int]],
                now_ms: int) -> tuple[int, int, list[int]]:
        """`answers`: per partition read, in answer order, (key, error code, high watermark, log
        start offset, has records, preferred read replica). Returns (error code, session id, the
        indexes of the answers to send)."""
        everything = list(range(len(answers)))
        session = self._session
        if session is not None:
            if session.epoch != next_epoch(self._request_epoch):  # another request moved the session on
                return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
            cached = session.partitions
            kept = []
            for i, (key, error, hw, log_start, has_records, preferred) in enumerate(answers):
                part = cached.get(key)
                if part is not None and part.must_respond(error, hw, log_start, has_records, preferred):
                    kept.append(i)
                    if has_records:  # Kafka's round robin: partitions that gave data are read last next time
                        cached[key] = cached.pop(key)
            return ErrorCode.NONE, session.id, kept
        if self._cache is None:
            return self.error, INVALID_SESSION_ID, everything if not self.error else []
        partitions = {}
        for key, _error, hw, log_start, _has_records, _preferred in answers:
            part = self.partitions[key]
            part.high_watermark, part.local_log_start_offset = hw, log_start
            partitions[key] = part
        shard = self._cache.next_shard()
        return ErrorCode.NONE, shard.maybe_create(now_ms, self._privileged, partitions, self._uses_topic_ids), everything
