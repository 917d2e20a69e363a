"""Requests one Gregor node sends another over the Kafka protocol: WriteTxnMarkers, from a
transaction coordinator to the master of another broker group (broker/cluster.py). Encoded and
decoded with kafka-python's classes; one short connection per call (markers are written once
per transaction and broker group, not per record)."""

from __future__ import annotations

import struct

import trio
from kafka.protocol.producer import WriteTxnMarkersRequest

from broker.replication import ProtocolError, receive_exactly
from store import StoreError

TIMEOUT_S = 15.0
_SIZE = struct.Struct(">i")


class MarkersNotWritten(StoreError):
    """Another group's master did not write a transaction's markers: the transaction stays
    prepared and the coordinator tries again (as a failed marker append here)."""


async def write_txn_markers(endpoint: tuple[str, int], partitions: list[tuple[str, int]], producer_id: int,
                            producer_epoch: int, commit: bool) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest[1](markers=[Marker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit, coordinator_epoch=0,
        topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])])
    request.with_header(correlation_id=1, client_id="gregor-txn-coordinator")
    try:
        with trio.fail_after(TIMEOUT_S):
            stream = await trio.open_tcp_stream(*endpoint)
            async with stream:
                await stream.send_all(bytes(request.encode(header=True, framed=True)))
                size = _SIZE.unpack(await receive_exactly(stream, 4))[0]
                frame = await receive_exactly(stream, size)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError) as exc:
        raise MarkersNotWritten(f"transaction markers to {endpoint[0]}:{endpoint[1]}: {exc!r}") from exc
    response = request.header.get_response_class().decode(frame, version=1, header=True)
    failed = [(t.name, p.partition_index, p.error_code) for m in response.markers for t in m.topics
              for p in t.partitions if p.error_code]
    if failed:
        raise MarkersNotWritten(f"transaction markers refused by {endpoint[0]}:{endpoint[1]}: {failed}")

