"""Dynamic broker configs (AlterConfigs, IncrementalAlterConfigs on a BROKER resource: one broker by
its node id, or every broker by an empty name) and config synonyms in DescribeConfigs, against Gregor
and Kafka 4.4.0 in the same run: the same errors and messages for a value Kafka refuses, the same
sources and synonyms once a setting is set, a topic's configs following the broker settings they
default from, and message.max.bytes set at run time refusing a larger batch on both."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from protocol.errors import ErrorCode
from tests.kit.both import GREGOR, KAFKA, connect, started
from tests.kit.broker_configs import (
    APPEND,
    BROKER,
    DELETE,
    SET,
    SUBTRACT,
    describe,
    incremental,
    legacy,
    settled,
)
from tests.kit.broker_configs import node_id as _node
from tests.kit.wire import batch, create_topic, produce_batch

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]
# the same static setting on both: Kafka then names log.retention.ms STATIC_BROKER_CONFIG, as Gregor
STATIC = {"log.retention.ms": "360000000"}


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    with started(request.param, tmp_path, STATIC, in_process=True, kafka_version=KAFKA_4) as b:
        client = connect(b)
        try:
            yield client
        finally:
            client.close()


INVALID_REQUEST, INVALID_CONFIG = ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_CONFIG
THREADS = "for configuration Invalid dynamic configuration"
# (this broker, or "" for the default, or a literal name; operations; Kafka 4.4's answer), validate_only
REFUSED_OR_TAKEN = [
    ("node", [("log.retention.ms", SET, "1000")], (0, None)),
    ("", [("log.retention.ms", SET, "1000")], (0, None)),
    ("node", [("log.retention.ms", SET, "abc")],
     (INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG")),
    ("node", [("max.connections", SET, "99999999999")],
     (INVALID_REQUEST, "Invalid value 99999999999 for configuration max.connections: Not a number of type INT")),
    ("node", [("max.connections", SET, "-1")],
     (INVALID_REQUEST, "Invalid value -1 for configuration max.connections: Value must be at least 0")),
    ("node", [("log.segment.bytes", SET, "10")],
     (INVALID_REQUEST, "Invalid value 10 for configuration log.segment.bytes: Value must be at least 1048576")),
    ("node", [("log.cleaner.min.cleanable.ratio", SET, "2")],
     (INVALID_REQUEST, ("Invalid value 2.0 for configuration log.cleaner.min.cleanable.ratio: Value must be no more "
                       "than 1"))),
    ("node", [("log.message.timestamp.type", SET, "Foo")],
     (INVALID_REQUEST, ("Invalid value Foo for configuration log.message.timestamp.type: String must be one of: "
                       "CreateTime, LogAppendTime"))),
    ("node", [("log.preallocate", SET, "maybe")],
     (INVALID_REQUEST, ("Invalid value maybe for configuration log.preallocate: Expected value to be either true "
                       "or false"))),
    ("node", [("compression.gzip.level", SET, "-5")],
     (INVALID_REQUEST, ("Invalid value -5 for configuration compression.gzip.level: Value must be between 1 and 9 "
                       "or equal to -1"))),
    ("node", [("log.retention.hours", SET, "5")],
     (INVALID_REQUEST, "Cannot update these configs dynamically: [log.retention.hours]")),
    ("node", [("log.retention.check.interval.ms", SET, "5")],
     (INVALID_REQUEST, "Cannot update these configs dynamically: [log.retention.check.interval.ms]")),
    ("node", [("ssl.keystore.location", SET, "/x")],
     (INVALID_REQUEST, ("These security configs can be dynamically updated only per-listener using the listener "
                       "prefix: [ssl.keystore.location]"))),
    ("", [("sasl.kerberos.min.time.before.relogin", SET, "100")],
     (INVALID_REQUEST, ("Cannot update these configs at default cluster level, broker id must be specified: "
                       "[sasl.kerberos.min.time.before.relogin]"))),
    ("node", [("sasl.kerberos.min.time.before.relogin", SET, "100")], (0, None)),
    ("node", [("num.io.threads", SET, "100")],
     (INVALID_REQUEST, ("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update "
                       "validation failed for num.io.threads=100, value should not be greater than double the "
                       f"current value 8 {THREADS}"))),
    ("node", [("num.io.threads", SET, "3")],
     (INVALID_REQUEST, ("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update "
                       f"validation failed for num.io.threads=3, value should be at least half the current value 8 "
                       f"{THREADS}"))),
    ("node", [("log.cleaner.threads", SET, "5")],
     (INVALID_REQUEST, ("Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads cannot "
                       f"be increased to more than double the current value 1 {THREADS}"))),
    ("node", [("log.cleaner.threads", SET, "0")], (INVALID_REQUEST, "/ by zero")),
    ("node", [("log.cleaner.threads", SET, "2")], (0, None)),
    ("node", [("log.cleaner.dedupe.buffer.size", SET, "10")],
     (INVALID_REQUEST, ("requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner "
                       "thread."))),
    ("node", [("max.connections.per.ip", SET, "0")],
     (INVALID_REQUEST, ("requirement failed: max.connections.per.ip can be set to zero only if "
                       "max.connections.per.ip.overrides property is set."))),
    ("node", [("log.retention.ms", SET, None)], (INVALID_REQUEST, "Null value not supported for : log.retention.ms")),
    ("node", [("log.retention.ms", APPEND, "5")],
     (INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")),
    ("node", [("log.retention.ms", SUBTRACT, "5")],
     (INVALID_CONFIG, "Config value subtract is not allowed for config key: log.retention.ms")),
    ("node", [("log.retention.ms", DELETE, None)], (0, None)),
    ("x", [("log.retention.ms", SET, "1000")], (INVALID_REQUEST, "Node id must be an integer, but it is: x")),
    ("node+1", [("log.retention.ms", SET, "1000")],
     (INVALID_REQUEST, "Unexpected broker id, expected {node}, but received {other}")),
]


def test_dynamic_broker_configs_kafka_refuses_get_its_error_and_message(broker):
    node = _node(broker)
    other = str(int(node) + 1)
    names = {"node": node, "node+1": other}
    answers = [incremental(broker, names.get(who, who), ops, validate_only=True) for who, ops, _ in REFUSED_OR_TAKEN]
    assert answers == [(code, None if text is None else text.format(node=node, other=other))
                       for _, _, (code, text) in REFUSED_OR_TAKEN]
    assert [legacy(broker, node, {"log.retention.ms": None}, validate_only=True),
            legacy(broker, node, {"log.retention.ms": "abc"}, validate_only=True),
            legacy(broker, node, {"log.retention.hours": "5"}, validate_only=True),
            legacy(broker, node, {"log.retention.ms": "1000"}, validate_only=True)] == [
        (INVALID_REQUEST, "Null value not supported for : log.retention.ms"),
        (INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"),
        (INVALID_REQUEST, "Cannot update these configs dynamically: [log.retention.hours]"),
        (0, None)]


KEYS = ["log.retention.ms", "num.io.threads", "log.segment.bytes", "message.max.bytes"]


def test_validate_only_changes_nothing(broker):
    node = _node(broker)
    before = describe(broker, BROKER, node, KEYS)
    assert incremental(broker, node, [("log.retention.ms", SET, "1000"), ("num.io.threads", SET, "9")],
                       validate_only=True) == (0, None)
    assert incremental(broker, "", [("log.segment.bytes", SET, "2000000")], validate_only=True) == (0, None)
    time.sleep(1)  # what Kafka would apply, it applies within a moment
    assert describe(broker, BROKER, node, KEYS) == before
    assert describe(broker, BROKER, "", KEYS) == {}


def test_a_setting_set_per_broker_and_by_default_is_described_with_its_sources_and_synonyms(broker):
    node = _node(broker)
    assert incremental(broker, node, [("log.retention.ms", SET, "1000000"), ("num.io.threads", SET, "9")]) == (0, None)
    assert incremental(broker, "", [("log.retention.ms", SET, "2000000"), ("log.segment.bytes", SET, "2000000")]) \
        == (0, None)
    expected = {
        "log.retention.ms": ("1000000", False, 2, [("log.retention.ms", "1000000", 2), ("log.retention.ms", "2000000", 3),
                                                   ("log.retention.ms", "360000000", 4),
                                                   ("log.retention.hours", "168", 5)]),
        "num.io.threads": ("9", False, 2, [("num.io.threads", "9", 2), ("num.io.threads", "8", 5)]),
        "log.segment.bytes": ("2000000", False, 3, [("log.segment.bytes", "2000000", 3),
                                                    ("log.segment.bytes", "1073741824", 5)]),
        "message.max.bytes": ("1048588", False, 5, [("message.max.bytes", "1048588", 5)]),
    }
    assert settled(lambda: describe(broker, BROKER, node, KEYS), expected) == expected
    assert describe(broker, BROKER, "", KEYS) == {
        "log.retention.ms": ("2000000", False, 3, [("log.retention.ms", "2000000", 3)]),
        "log.segment.bytes": ("2000000", False, 3, [("log.segment.bytes", "2000000", 3)])}
    # AlterConfigs replaces the broker's own set: num.io.threads goes, log.retention.ms stays
    assert legacy(broker, node, {"log.retention.ms": "1000000"}) == (0, None)
    assert incremental(broker, "", [("log.segment.bytes", DELETE, None)]) == (0, None)
    expected.update({"num.io.threads": ("8", False, 5, [("num.io.threads", "8", 5)]),
                     "log.segment.bytes": ("1073741824", False, 5, [("log.segment.bytes", "1073741824", 5)])})
    assert settled(lambda: describe(broker, BROKER, node, KEYS), expected) == expected


TOPIC_KEYS = ["retention.ms", "segment.bytes", "max.message.bytes", "delete.retention.ms", "message.timestamp.type",
              "min.cleanable.dirty.ratio", "cleanup.policy", "retention.bytes"]


def test_a_topics_configs_follow_the_broker_settings_they_default_from(broker):
    node = _node(broker)
    own, error, _ = create_topic(broker, {"retention.ms": "5000", "cleanup.policy": "compact"})
    plain, error2, _ = create_topic(broker)
    assert (error, error2) == (0, 0)
    assert incremental(broker, node, [("log.retention.ms", SET, "1000000"), ("message.max.bytes", SET, "500000"),
                                      ("log.cleaner.delete.retention.ms", SET, "1000")]) == (0, None)
    assert incremental(broker, "", [("log.retention.ms", SET, "2000000"), ("log.segment.bytes", SET, "2000000"),
                                    ("log.message.timestamp.type", SET, "LogAppendTime")]) == (0, None)
    retention = [("log.retention.ms", "1000000", 2), ("log.retention.ms", "2000000", 3),
                 ("log.retention.ms", "360000000", 4), ("log.retention.hours", "168", 5)]
    common = {
        "segment.bytes": ("2000000", False, 3, [("log.segment.bytes", "2000000", 3),
                                                ("log.segment.bytes", "1073741824", 5)]),
        "max.message.bytes": ("500000", False, 2, [("message.max.bytes", "500000", 2),
                                                   ("message.max.bytes", "1048588", 5)]),
        "delete.retention.ms": ("1000", False, 2, [("log.cleaner.delete.retention.ms", "1000", 2),
                                                   ("log.cleaner.delete.retention.ms", "86400000", 5)]),
        "message.timestamp.type": ("LogAppendTime", False, 3, [("log.message.timestamp.type", "LogAppendTime", 3),
                                                               ("log.message.timestamp.type", "CreateTime", 5)]),
        "min.cleanable.dirty.ratio": ("0.5", False, 5, [("log.cleaner.min.cleanable.ratio", "0.5", 5)]),
        "retention.bytes": ("-1", False, 5, [("log.retention.bytes", "-1", 5)]),
    }
    expected_own = {**common,
                    "retention.ms": ("5000", False, 1, [("retention.ms", "5000", 1), *retention]),
                    "cleanup.policy": ("compact", False, 1, [("cleanup.policy", "compact", 1),
                                                             ("log.cleanup.policy", "delete", 5)])}
    expected_plain = {**common,
                      "retention.ms": ("1000000", False, 2, retention),
                      "cleanup.policy": ("delete", False, 5, [("log.cleanup.policy", "delete", 5)])}
    assert settled(lambda: describe(broker, 2, own, TOPIC_KEYS), expected_own) == expected_own
    assert describe(broker, 2, plain, TOPIC_KEYS) == expected_plain


def test_message_max_bytes_set_at_run_time_refuses_a_larger_batch(broker):
    node = _node(broker)
    topic, error, _ = create_topic(broker)
    assert error == 0
    records = batch(1, b"x" * 5000)
    assert produce_batch(broker, topic, records).error_code == 0
    assert incremental(broker, node, [("message.max.bytes", SET, "2000")]) == (0, None)
    refused = settled(lambda: produce_batch(broker, topic, records).error_code, ErrorCode.MESSAGE_TOO_LARGE)
    assert refused == ErrorCode.MESSAGE_TOO_LARGE
    assert incremental(broker, node, [("message.max.bytes", DELETE, None)]) == (0, None)
    assert settled(lambda: produce_batch(broker, topic, records).error_code, 0) == 0


def _documentation(client, resource_type: int, name: str, keys: list[str], asked: bool) -> dict[str, bool]:
    """name -> whether its documentation came (a non-empty string) in DescribeConfigs v4."""
    R = DescribeConfigsRequest.DescribeConfigsResource
    answer = client.request(DescribeConfigsRequest[4](resources=[R(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=False, include_documentation=asked))
    return {c.name: bool(c.documentation) for c in answer.results[0].configs}


def test_documentation_comes_only_when_asked(broker):
    node = _node(broker)
    topic, error, _ = create_topic(broker)
    assert error == 0
    topic_keys, broker_keys = ["retention.ms", "segment.ms"], ["log.retention.ms", "num.io.threads"]
    assert _documentation(broker, 2, topic, topic_keys, False) == {"retention.ms": False, "segment.ms": False}
    assert _documentation(broker, 2, topic, topic_keys, True) == {"retention.ms": True, "segment.ms": True}
    assert _documentation(broker, BROKER, node, broker_keys, False) == {"log.retention.ms": False,
                                                                        "num.io.threads": False}
    assert _documentation(broker, BROKER, node, broker_keys, True) == {"log.retention.ms": True,
                                                                       "num.io.threads": True}
