"""DescribeTransactions and ListTransactions (what `kafka-transactions.sh describe|list` sends)
against Gregor and Apache Kafka 3.9 alike: an ongoing transaction, then the same after commit."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest

from tests.kit.wire import WireClient
from tests.kit.both import GREGOR, KAFKA, started

TRANSACTIONAL_ID_NOT_FOUND = 105


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    (tmp_path / "broker").mkdir()
    with started(request.param, tmp_path / "broker", {"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def describe(client: WireClient, *ids: str) -> dict:
    answer = client.request(DescribeTransactionsRequest[0](transactional_ids=list(ids)))
    return {s.transactional_id: s for s in answer.transaction_states}


def listed(client: WireClient, states: list[str] | None = None, pids: list[int] | None = None) -> dict[str, str]:
    answer = client.request(ListTransactionsRequest[1](state_filters=states or [], producer_id_filters=pids or [],
                                                       duration_filter=-1))
    assert answer.error_code == 0
    return {s.transactional_id: s.transaction_state for s in answer.transaction_states}


def test_describe_and_list_transactions_show_an_ongoing_then_a_committed_transaction(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "described",
                         "transaction.timeout.ms": 45000})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("t", b"x", partition=1)
    assert producer.flush(30) == 0
    client = WireClient(broker.bootstrap)
    try:
        found = describe(client, "described", "nobody")
        ongoing = found["described"]
        assert (ongoing.error_code, ongoing.transaction_state, ongoing.transaction_timeout_ms) == (0, "Ongoing", 45000)
        assert [(t.topic, list(t.partitions)) for t in ongoing.topics] == [("t", [1])]
        assert ongoing.transaction_start_time_ms > 0 and ongoing.producer_id >= 0 and ongoing.producer_epoch >= 0
        assert found["nobody"].error_code == TRANSACTIONAL_ID_NOT_FOUND
        assert listed(client, ["Ongoing"]) == {"described": "Ongoing"}
        assert listed(client, pids=[ongoing.producer_id]) == {"described": "Ongoing"}
        assert listed(client, ["CompleteAbort"]) == {}

        producer.commit_transaction(60)
        # Kafka answers EndTxn at PrepareCommit and writes the markers after; Gregor completes first
        deadline = time.monotonic() + 30
        while (done := describe(client, "described")["described"]).transaction_state != "CompleteCommit":
            assert done.transaction_state == "PrepareCommit" and time.monotonic() < deadline, done
            time.sleep(0.1)
        assert (done.transaction_state, list(done.topics), done.producer_id) == ("CompleteCommit", [],
                                                                               ongoing.producer_id)
        unknown = client.request(ListTransactionsRequest[1](state_filters=["Sleeping"], producer_id_filters=[],
                                                            duration_filter=-1))
        assert list(unknown.unknown_state_filters) == ["Sleeping"]
    finally:
        client.close()
