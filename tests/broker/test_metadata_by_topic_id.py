"""Metadata v12 asked by topic id (how KIP-848's consumers name the topics of their assignment):
a known id answers its topic by name, an unknown one UNKNOWN_TOPIC_ID with its id, as Kafka does."""

from __future__ import annotations

import uuid

import trio
from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode
from tests.kit.inprocess import exchange, running_broker


def test_topics_asked_by_id_are_answered_by_name_or_unknown_topic_id(tmp_path):
    async def ask():
        async with running_broker(tmp_path) as broker:
            meta = broker.store.create_topic("orders", 3, {})
            R = MetadataRequest[12]
            unknown = uuid.uuid4()
            request = R(topics=[R.MetadataRequestTopic(topic_id=meta.topic_id, name=None),
                                R.MetadataRequestTopic(topic_id=unknown, name=None)],
                        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            response = await exchange(broker, request)
            return meta.topic_id, unknown, [(t.error_code, t.name, t.topic_id, len(t.partitions))
                                            for t in response.topics]

    known, unknown, topics = trio.run(ask)
    assert topics == [(0, "orders", known, 3), (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown, 0)]
