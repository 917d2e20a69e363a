"""The test kit's wire helpers: a raw Kafka client that frames requests itself (so tests can also
send broken ones), and the few requests many tests send with it."""

from __future__ import annotations

import socket
import struct
import time
import uuid

from kafka.protocol.admin import AlterConfigsRequest, CreateTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

NONE, INVALID_CONFIG, TOPIC_RESOURCE = 0, 40, 2
SET, DELETE, APPEND = 0, 1, 2  # IncrementalAlterConfigs operations


class WireClient:
    """Kafka requests framed by hand over a socket; tests/kit/inprocess.py's MemoryWireClient is the
    same client over an in-memory stream into an in-process broker."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, source: str | None = None) -> None:
        """`source`: the local address to connect from (any of 127.0.0.0/8 reaches a loopback broker)."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=None if source is None else (source, 0))
        self.timeout = timeout
        self.correlation_id = 0

    # the transport: a subclass replaces these four

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def _recv(self, n: int, timeout: float | None = None) -> bytes:
        """Up to n bytes; b"" once the peer closed; TimeoutError after `timeout` (default: the client's)."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            return self.sock.recv(n)
        except ConnectionResetError:
            return b""

    # requests and frames

    def send(self, request: ApiMessage) -> int:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="gregor-tests")
        self.send_raw(bytes(request.encode(header=True, framed=True)))
        return self.correlation_id

    def receive_frame(self) -> bytes | None:
        """The next response frame, or None if the broker closed the connection."""
        size = self._read(4)
        if size is None:
            return None
        (n,) = struct.unpack(">i", size)
        return self._read(n)

    def request(self, request: ApiMessage):
        version = request.API_VERSION
        correlation_id = self.send(request)
        frame = self.receive_frame()
        assert frame is not None, "connection closed"
        response_cls = request.header.get_response_class()
        response = response_cls.decode(frame, version=version, header=True)
        assert response.header.correlation_id == correlation_id
        return response

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        try:
            return self._recv(1, timeout) == b""
        except BrokenPipeError:
            return True
        except TimeoutError:
            return False

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)


def produce_request(topic: str, values: list[bytes], acks: int = -1, partition: int = 0):
    """A Produce (v8) of `values` as one batch to `partition`."""
    batch = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, value in enumerate(values):
        batch.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    data = ProduceRequest.TopicProduceData
    return ProduceRequest[8](transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=bytes(batch.build()))])])


def produce(address: str, topic: str, values: list[bytes], acks: int = -1, partition: int = 0) -> int:
    """One produce_request straight to `address` on a connection of its own (no client's
    Metadata lookups): the partition's error code."""
    client = WireClient(address)
    try:
        answer = client.request(produce_request(topic, values, acks, partition))
    finally:
        client.close()
    return answer.responses[0].partition_responses[0].error_code


# One request on a WireClient

def batch(n=3, value=b"v"):
    """One v2 batch of `n` records with `value`."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


def produce_batch(client, topic, records, partition=0, acks=1):
    """A Produce (v9) of the batch `records` on `client`: the partition's answer."""
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])])
    return client.request(req).responses[0].partition_responses[0]


def fetch(client, topic, offset, max_wait_ms=0, min_bytes=1, partition=0):
    F = FetchRequest.FetchTopic
    req = FetchRequest[12](replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[F(topic=topic, partitions=[F.FetchPartition(
                               partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    return client.request(req).responses[0].partitions[0]


def create_by_metadata(client, topic):
    """The topic auto-created by a Metadata request (auto.create.topics.enable on)."""
    client.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
                                       allow_auto_topic_creation=True, include_topic_authorized_operations=False))


def create_topic(client: WireClient, configs: dict[str, str] | None = None, partitions: int = 1) -> tuple[str, int, str]:
    """A new topic (CreateTopics v5, a random name) once every partition has a leader: (name, error, message)."""
    T = CreateTopicsRequest.CreatableTopic
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    r = client.request(CreateTopicsRequest[5](topics=[T(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=15000, validate_only=False))
    if r.topics[0].error_code == NONE:
        wait_for_leaders(client, name)
    return name, r.topics[0].error_code, r.topics[0].error_message


def wait_for_leaders(client: WireClient, topic: str) -> None:
    """Kafka answers CreateTopics once its controller has the topic; the broker learns of it a
    moment later (until then DescribeConfigs lists nothing for it). Gregor has it at once."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = client.request(MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
        t = r.topics[0]
        if t.error_code == NONE and t.partitions and all(p.leader_id >= 0 for p in t.partitions):
            return
        time.sleep(0.05)
    raise AssertionError(f"{topic} has no leaders after 15 s")


def describe_configs(client: WireClient, topic: str, *names: str) -> dict[str, tuple[str, int]]:
    r = client.request(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=list(names))],
        include_synonyms=False, include_documentation=False))
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def incremental(client: WireClient, topic: str, *ops: tuple[str, int, str | None], validate_only=False):
    """IncrementalAlterConfigs v1 of a topic, ops as (name, SET/DELETE/APPEND, value): (error, message)."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    r = client.request(IncrementalAlterConfigsRequest[1](resources=[R(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configs=[R.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
        validate_only=validate_only))
    return r.responses[0].error_code, r.responses[0].error_message


def legacy(client: WireClient, topic: str, configs: dict[str, str]):
    """AlterConfigs v2 of a topic (every override replaced): (error, message)."""
    R = AlterConfigsRequest.AlterConfigsResource
    r = client.request(AlterConfigsRequest[2](resources=[R(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configs=[R.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=False))
    return r.responses[0].error_code, r.responses[0].error_message
