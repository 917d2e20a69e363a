"""A raw Kafka wire client for tests: frames requests itself, so tests can
also send broken ones."""

from __future__ import annotations

import socket
import struct
import time

from kafka.protocol.api_message import ApiMessage


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, source: str | None = None) -> None:
        """`source`: the local address to connect from (any of 127.0.0.0/8 reaches a loopback broker)."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=None if source is None else (source, 0))
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def send(self, request: ApiMessage) -> int:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="gregor-tests")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
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
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)


def produce_request(topic: str, values: list[bytes], acks: int = -1, partition: int = 0):
    """A Produce (v8) of `values` as one batch to `partition`."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder
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
