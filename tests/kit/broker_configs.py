"""The requests the dynamic-broker-config tests send on a WireClient (AlterConfigs and
IncrementalAlterConfigs on a BROKER resource, DescribeConfigs with synonyms, the node id, a
partition's log start), and `settled`: an answer once it stops changing into the expected one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kafka.protocol.admin import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from tests.kit.wait import wait_until

T = TypeVar("T")
TOPIC, BROKER, GROUP = 2, 4, 32  # config resource types
SET, DELETE, APPEND, SUBTRACT = range(4)  # IncrementalAlterConfigs operations


def node_id(client) -> str:
    """The node id of the broker `client` talks to, as a BROKER resource names it."""
    answer = client.request(MetadataRequest[9](topics=[], allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
    return str(answer.brokers[0].node_id)


def incremental(client, name: str, ops, validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of the BROKER resource `name`, ops as (name, operation, value)."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    answer = client.request(IncrementalAlterConfigsRequest[1](resources=[R(
        resource_type=BROKER, resource_name=name, configs=[R.AlterableConfig(name=n, config_operation=o, value=v)
                                                          for n, o, v in ops])], validate_only=validate_only))
    return answer.responses[0].error_code, answer.responses[0].error_message


def legacy(client, name: str, configs: dict[str, str | None], validate_only: bool = False) -> tuple[int, str | None]:
    """AlterConfigs v2 of the BROKER resource `name`: its whole set of dynamic settings."""
    R = AlterConfigsRequest.AlterConfigsResource
    answer = client.request(AlterConfigsRequest[2](resources=[R(
        resource_type=BROKER, resource_name=name, configs=[R.AlterableConfig(name=n, value=v)
                                                          for n, v in configs.items()])], validate_only=validate_only))
    return answer.responses[0].error_code, answer.responses[0].error_message


def describe(client, resource_type: int, name: str, keys: list[str]) -> dict[str, tuple]:
    """DescribeConfigs v4 with synonyms: name -> (value, read_only, source, [(name, value, source)])."""
    R = DescribeConfigsRequest.DescribeConfigsResource
    answer = client.request(DescribeConfigsRequest[4](resources=[R(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=True, include_documentation=False))
    result = answer.results[0]
    assert result.error_code == 0, result
    return {c.name: (c.value, c.read_only, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def log_start(client, topic: str) -> int:
    """Partition 0's earliest offset (ListOffsets v7, timestamp -2)."""
    T_ = ListOffsetsRequest.ListOffsetsTopic
    answer = client.request(ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[T_(name=topic, partitions=[
        T_.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)])]))
    return answer.topics[0].partitions[0].offset


def settled(read: Callable[[], T], expected: T, timeout: float = 20.0) -> T:
    """`read()` once it equals `expected`, or its answer after `timeout` (for the assertion to show):
    Kafka puts a dynamic config in force a moment after answering."""
    try:
        wait_until(lambda: read() == expected, timeout, f"{expected!r}", interval=0.3)
    except AssertionError:
        pass
    return read()
