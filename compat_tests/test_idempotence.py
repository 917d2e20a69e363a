"""The idempotent producer under retries: a lost Produce response makes the client resend the
batch, and the broker must store it once (and answer the duplicate with the original offsets)."""

from __future__ import annotations

import pytest

from compat_tests.clients import Message, Unsupported, make_client
from compat_tests.fault_proxy import LossyProxy


def test_retried_batch_after_lost_response_is_stored_once(client_name, target, new_topic, reference):
    if target.broker_count != 1:
        pytest.skip(f"the lossy proxy fronts one broker; this cluster has {target.broker_count}")
    if client_name == "kcat":
        raise Unsupported("kcat exits as soon as its only broker connection drops (all brokers down)")
    topic = new_topic()
    sent = [Message(b"m%d" % i, key=b"k%d" % i) for i in range(10)]
    with LossyProxy(target.bootstrap, drops=1) as proxy:
        deliveries = make_client(client_name, proxy.address).produce(topic, sent, idempotent=True)
    assert proxy.dropped == 1
    assert proxy.produce_requests > 1  # the lost batch was sent again
    if deliveries is not None:
        assert [(d.partition, d.offset) for d in deliveries] == [(0, i) for i in range(10)]
    got = reference.consume(topic, [0], "earliest")
    assert [(r.offset, r.value) for r in got] == [(i, m.value) for i, m in enumerate(sent)]
