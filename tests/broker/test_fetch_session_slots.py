"""max.incremental.fetch.session.cache.slots against Gregor and a real Apache Kafka 4.4.0: the slots
are split between 8 shards that take new sessions in turn, so 8 slots hold one session per shard and
a ninth young session finds no room (it is answered as a full fetch with session id 0)."""

from __future__ import annotations

import pytest

from broker.fetch_sessions import SHARDS
from tests.broker.test_fetch_sessions_live import KAFKA_4, create, fetch
from tests.kit.both import GREGOR, KAFKA, connect, started

pytestmark = [pytest.mark.kafka_version(KAFKA_4)]
SHARD_IDS = (2**31 - 1) // SHARDS  # the session ids each shard hands out


@pytest.fixture(params=[GREGOR, KAFKA])
def client(request, tmp_path):
    settings = {"auto.create.topics.enable": "false", "max.incremental.fetch.session.cache.slots": str(SHARDS)}
    with started(request.param, tmp_path, settings, in_process=True, kafka_version=KAFKA_4) as b:
        c = connect(b)
        yield c
        c.close()


def test_eight_slots_keep_one_session_per_shard_and_refuse_a_ninth(client):
    name, _ = create(client, partitions=1)
    opened = [fetch(client, 12, [(name, 0, 0)], session_id=0, epoch=0) for _ in range(SHARDS + 1)]
    assert [r.error_code for r in opened] == [0] * (SHARDS + 1)
    ids = [r.session_id for r in opened]
    assert sorted(i // SHARD_IDS for i in ids[:SHARDS]) == list(range(SHARDS))
    assert ids[SHARDS] == 0 and [len(r.responses) for r in opened] == [1] * (SHARDS + 1)
    # the refused client fetches on without a session; the others' sessions work
    assert fetch(client, 12, [], session_id=ids[0], epoch=1).error_code == 0
