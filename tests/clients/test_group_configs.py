"""Group configs (IncrementalAlterConfigs on a GROUP resource) against Gregor and Kafka 4.4.0: the
values Kafka refuses get its error and message on both, DescribeConfigs gives each its source, type
and synonyms as Kafka does, and a consumer-protocol group's own heartbeat interval
(consumer.heartbeat.interval.ms) is what its members are told to use."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.protocol.admin import DescribeConfigsRequest

from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupHeartbeatRequest
from tests.kit.both import GREGOR, KAFKA, started
from tests.kit.broker_configs import GROUP, settled
from tests.kit.wire import WireClient

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    with started(request.param, tmp_path, {}, in_process=True, kafka_version=KAFKA_4) as b:
        yield b


def _alter(admin: AdminClient, group: str, configs: dict[str, str]) -> tuple[int, str]:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    try:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
    except KafkaException as exc:
        return exc.args[0].code(), exc.args[0].str()
    return ErrorCode.NONE, ""


# (configs, the message of Kafka 4.4's INVALID_CONFIG, or "" when taken); the brokers' defaults
REFUSED_OR_TAKEN = [
    ({"consumer.session.timeout.ms": "50000"}, ""),
    ({"consumer.session.timeout.ms": "1000"}, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"consumer.session.timeout.ms": "70000"}, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"consumer.heartbeat.interval.ms": "1000"}, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ({"consumer.heartbeat.interval.ms": "6000"}, ""),
    ({"consumer.session.timeout.ms": "abc"},
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"share.session.timeout.ms": "1000"}, "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"share.heartbeat.interval.ms": "20000"}, "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ({"share.record.lock.duration.ms": "1000"}, "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    ({"share.delivery.count.limit": "20"}, "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
]


def test_group_configs_out_of_the_brokers_bounds_are_refused_with_kafkas_message(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    answers = [_alter(admin, f"bounded-{i}", configs) for i, (configs, _) in enumerate(REFUSED_OR_TAKEN)]
    assert answers == [(ErrorCode.INVALID_CONFIG, m) if m else (ErrorCode.NONE, "") for _, m in REFUSED_OR_TAKEN]


def test_a_consumer_protocol_groups_own_heartbeat_interval_is_given_to_its_members(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("paced", 1, 1)])["paced"].result(timeout=30)
    assert _alter(admin, "paced-group", {"consumer.heartbeat.interval.ms": "6000"}) == (ErrorCode.NONE, "")
    client = WireClient(broker.bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:  # Kafka applies a group config a moment after answering
            joined = client.request(ConsumerGroupHeartbeatRequest[0](
                group_id="paced-group", member_id="", member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout_ms=30000, subscribed_topic_names=["paced"], server_assignor=None,
                topic_partitions=[]))
            if joined.error_code == 0 and joined.heartbeat_interval_ms == 6000 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 6000), joined
        other = client.request(ConsumerGroupHeartbeatRequest[0](
            group_id=f"unpaced-{uuid.uuid4()}", member_id="", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000, subscribed_topic_names=["paced"], server_assignor=None, topic_partitions=[]))
        assert (other.error_code, other.heartbeat_interval_ms) == (0, 5000), other  # the broker's setting
    finally:
        client.close()


def test_group_configs_are_described_with_their_source_type_and_synonyms(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _alter(admin, "described", {"share.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest",
                                       "errors.deadletterqueue.copy.record.enable": "true"}) == (ErrorCode.NONE, "")
    keys = ["share.session.timeout.ms", "share.auto.offset.reset", "errors.deadletterqueue.copy.record.enable",
            "share.record.lock.duration.ms"]
    expected = {
        "share.session.timeout.ms": ("50000", 8, 3, [("share.session.timeout.ms", "50000", 8),
                                                      ("group.share.session.timeout.ms", "45000", 5)]),
        "share.auto.offset.reset": ("earliest", 8, 2, [("share.auto.offset.reset", "earliest", 8),
                                                        ("share.auto.offset.reset", "latest", 5)]),
        "errors.deadletterqueue.copy.record.enable": ("true", 8, 1, [
            ("errors.deadletterqueue.copy.record.enable", "true", 8),
            ("errors.deadletterqueue.copy.record.enable", "false", 5)]),
        "share.record.lock.duration.ms": ("30000", 5, 3, [("group.share.record.lock.duration.ms", "30000", 5)]),
    }
    client = WireClient(broker.bootstrap)

    def described() -> dict:
        answer = client.request(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=GROUP, resource_name="described", configuration_keys=keys)],
            include_synonyms=True, include_documentation=False))
        return {c.name: (c.value, c.config_source, c.config_type, [(s.name, s.value, s.source) for s in c.synonyms])
                for c in answer.results[0].configs}
    try:
        assert settled(described, expected, 30) == expected  # Kafka applies a group config a moment after answering
    finally:
        client.close()
