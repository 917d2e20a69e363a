"""The fetch session cache as a state machine, with no broker: Kafka's FetchManager contexts,
session epochs, incremental answers, shards and eviction (broker/fetch_sessions.py)."""

from __future__ import annotations

import uuid

import pytest

from broker.fetch_sessions import (
    EVICTION_MS,
    SHARDS,
    FetchPartition,
    FetchSessionCache,
    next_epoch,
)
from protocol.errors import ErrorCode

V = 12  # a Fetch version that names topics
T0, T1 = ("t", 0), ("t", 1)


def _data(*keys, offset=0):
    return {key: FetchPartition(key[0] if isinstance(key[0], str) else None, offset, 1 << 20) for key in keys}


def _answer(key, hw, records=False, error=0, log_start=0, preferred=-1):
    return key, error, hw, log_start, records, preferred


def _open(cache, now=0, keys=(T0, T1), hw=5, version=V):
    context = cache.new_context(version, 0, 0, _data(*keys), [], False, now)
    error, session_id, kept = context.respond([_answer(k, hw) for k in keys], now)
    assert (error, kept) == (0, list(range(len(keys))))
    return session_id


def test_a_full_fetch_with_epoch_0_opens_a_session_whose_next_epoch_is_1():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    assert session_id > 0 and cache.get(session_id).epoch == 1
    context = cache.new_context(V, session_id, 1, {}, [], False, 1)
    assert context.error == 0 and list(context.partitions) == [T0, T1]
    assert cache.get(session_id).epoch == 2


def test_an_incremental_answer_carries_only_partitions_with_news():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    context = cache.new_context(V, session_id, 1, {}, [], False, 1)
    _, sid, kept = context.respond([_answer(T0, 5), _answer(T1, 6)], 1)  # p1's high watermark moved
    assert (sid, kept) == (session_id, [1])
    context = cache.new_context(V, session_id, 2, {}, [], False, 2)
    assert context.respond([_answer(T0, 5), _answer(T1, 6)], 2)[2] == []
    context = cache.new_context(V, session_id, 3, {}, [], False, 3)
    assert context.respond([_answer(T0, 5, records=True), _answer(T1, 6, log_start=1)], 3)[2] == [0, 1]


def test_an_error_is_always_answered_and_the_partition_again_once_it_clears():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    context = cache.new_context(V, session_id, 1, {}, [], False, 1)
    assert context.respond([_answer(T0, -1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER), _answer(T1, 5)], 1)[2] == [0]
    context = cache.new_context(V, session_id, 2, {}, [], False, 2)
    assert context.respond([_answer(T0, 5), _answer(T1, 5)], 2)[2] == [0]


def test_a_partition_that_gave_records_is_read_last_next_time():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    context = cache.new_context(V, session_id, 1, {}, [], False, 1)
    context.respond([_answer(T0, 9, records=True), _answer(T1, 5)], 1)
    assert list(cache.new_context(V, session_id, 2, {}, [], False, 2).partitions) == [T1, T0]


def test_an_incremental_request_updates_adds_and_forgets_partitions():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    changed = _data(T0, ("u", 3), offset=7)
    context = cache.new_context(V, session_id, 1, changed, [T1], False, 1)
    assert list(context.partitions) == [T0, ("u", 3)]
    assert context.partitions[T0].fetch_offset == 7
    # a partition new to the session is answered whatever it holds: the client knows nothing of it
    assert context.respond([_answer(T0, 5), _answer(("u", 3), 0)], 1)[2] == [1]


def test_forgetting_every_partition_closes_the_session_and_answers_sessionless():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    context = cache.new_context(V, session_id, 1, {}, [T0, T1], False, 1)
    assert context.respond([], 1) == (0, 0, [])
    assert cache.get(session_id) is None


@pytest.mark.parametrize("epoch, error", [(5, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                                          (2, ErrorCode.INVALID_FETCH_SESSION_EPOCH)])
def test_a_wrong_epoch_is_refused_and_the_session_stays(epoch, error):
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    context = cache.new_context(V, session_id, epoch, _data(T0), [], False, 1)
    assert (context.error, context.respond([], 1)) == (error, (error, 0, []))
    assert cache.new_context(V, session_id, 1, {}, [], False, 1).error == 0


@pytest.mark.parametrize("session_id", [2147483000, 2147483647, -5, 0])
def test_an_unknown_session_id_is_not_found(session_id):
    cache = FetchSessionCache(1000)
    assert cache.new_context(V, session_id, 1, {}, [], False, 0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_keeps_the_topic_naming_it_began_with():
    cache = FetchSessionCache(1000)
    by_name = _open(cache)
    by_id = _open(cache, keys=((uuid.uuid4(), 0),), version=13)
    assert cache.new_context(13, by_name, 1, {}, [], False, 1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert cache.new_context(12, by_id, 1, {}, [], False, 1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert cache.new_context(18, by_id, 1, {}, [], False, 1).error == 0


def test_epoch_minus_one_closes_the_session_and_opens_none():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    context = cache.new_context(V, session_id, -1, _data(T0), [], False, 1)
    assert context.respond([_answer(T0, 5)], 1) == (0, 0, [0])
    assert len(cache) == 0


def test_a_full_fetch_naming_a_session_replaces_it():
    cache = FetchSessionCache(1000)
    old = _open(cache)
    new = cache.new_context(V, old, 0, _data(T0), [], False, 1).respond([_answer(T0, 5)], 1)[1]
    assert cache.get(old) is None and cache.get(new) is not None and len(cache) == 1


def test_a_racing_request_that_moved_the_session_on_makes_this_answer_an_epoch_error():
    cache = FetchSessionCache(1000)
    session_id = _open(cache)
    slow = cache.new_context(V, session_id, 1, {}, [], False, 1)
    cache.new_context(V, session_id, 2, {}, [], False, 2)
    assert slow.respond([_answer(T0, 5)], 3) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id, [])


def test_session_ids_name_their_shard_and_shards_take_new_sessions_in_turn():
    cache = FetchSessionCache(SHARDS)  # one slot per shard
    ids = [_open(cache) for _ in range(SHARDS)]
    shards = [cache.shard_of(i).number for i in ids]
    assert sorted(shards) == list(range(SHARDS)) and len(cache) == SHARDS


def test_fewer_slots_than_shards_keep_no_session():
    cache = FetchSessionCache(SHARDS - 1)
    assert _open(cache) == 0 and len(cache) == 0


def test_a_full_shard_refuses_a_new_session_while_its_sessions_are_young():
    cache = FetchSessionCache(SHARDS)
    for _ in range(SHARDS):
        _open(cache)
    assert _open(cache, now=EVICTION_MS, keys=(T0, T1, ("u", 0))) == 0


def test_a_session_unused_for_the_eviction_time_gives_way():
    cache = FetchSessionCache(SHARDS)
    first = _open(cache, now=0)
    for _ in range(SHARDS - 1):
        _open(cache, now=10)
    newcomer = _open(cache, now=EVICTION_MS + 1)  # the turn is back at the first session's shard
    assert newcomer and cache.get(first) is None and len(cache) == SHARDS


def test_a_larger_newcomer_evicts_an_old_but_busy_smaller_session():
    cache = FetchSessionCache(SHARDS)
    small = _open(cache, now=0, keys=(T0,))  # shard 0
    for _ in range(SHARDS - 1):
        _open(cache, now=0, keys=(T0, T1, ("u", 0)))
    later = EVICTION_MS + 5  # every session is used just now: none stale, all created long ago
    for shard in cache.shards:
        for session in shard.sessions.values():
            shard.touch(session, later)
    assert _open(cache, now=later + 1, keys=(T0,)) == 0  # shard 0, same size: the older one stays
    for _ in range(SHARDS - 1):
        assert _open(cache, now=later + 1, keys=(T0, T1)) == 0  # shards 1-7 hold larger ones
    bigger = _open(cache, now=later + 2, keys=(T0, T1))  # shard 0 again
    assert bigger and cache.get(small) is None


def test_a_followers_session_evicts_a_consumers_at_once():
    cache = FetchSessionCache(SHARDS)
    consumer = _open(cache, now=0)
    for _ in range(SHARDS - 1):
        _open(cache, now=0)
    context = cache.new_context(V, 0, 0, _data(T0), [], True, 1)
    follower = context.respond([_answer(T0, 5)], 1)[1]
    assert follower and cache.get(consumer) is None and cache.get(follower).privileged


def test_epochs_wrap_to_one_and_the_final_epoch_stays_final():
    assert (next_epoch(0), next_epoch(2**31 - 1), next_epoch(-1)) == (1, 1, -1)


def test_only_a_sessionless_fetch_answers_every_partition_without_the_session_layer():
    """Epoch -1 (FINAL_EPOCH) with no session: the handler answers every partition read and skips
    respond(); a full fetch that may open a session and an incremental one go through it."""
    cache = FetchSessionCache(1000)
    assert cache.new_context(V, 0, -1, _data(T0), [], False, 0).sessionless
    assert not cache.new_context(V, 0, 0, _data(T0), [], False, 0).sessionless
    session_id = _open(cache)
    assert not cache.new_context(V, session_id, 1, {}, [], False, 1).sessionless
    context = cache.new_context(V, session_id, -1, _data(T0), [], False, 2)  # closes the session
    assert context.sessionless and cache.get(session_id) is None
    assert context.respond([_answer(T0, 5)], 2) == (0, 0, [0])  # what respond() would have said
