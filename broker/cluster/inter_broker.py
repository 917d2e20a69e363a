"""Requests one Gregor node sends another: WriteTxnMarkers, from a transaction coordinator to
the master of another broker group (broker/cluster/node.py). They go over the replication port, the
channel between a cluster's nodes (MARKERS_MAGIC and the replication version, then one Kafka
request frame, answered with one Kafka response frame), not over a client listener: a listener's
SASL, TLS and ACLs are for clients, and a coordinator that sent them to the first advertised
listener failed where that listener required SASL; with security.inter.broker.protocol=SSL they
go through TLS as the shipping does (broker/cluster/tls.py), and with SASL_* after the node's
SASL login (broker/cluster/sasl.py). Encoded and decoded with kafka-python's
classes; one short connection per call (markers are written once per transaction and broker
group, not per record)."""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio
from kafka.protocol.producer import WriteTxnMarkersRequest

from broker.handlers.txn import handle_write_txn_markers
from broker.net import peer
from broker.cluster.shipping import HELLO_HEAD, MARKERS_MAGIC, VERSION, ProtocolError, receive_exactly
from protocol.codec import MalformedRequest, Request, decode_request, encode_response
from store import StoreError

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger("gregor.replication")
TIMEOUT_S = 15.0
MAX_FRAME = 1 << 20  # a WriteTxnMarkers request: markers of one transaction for one broker group
_SIZE = struct.Struct(">i")


class MarkersNotWritten(StoreError):
    """Another group's master did not write a transaction's markers: the transaction stays
    prepared and the coordinator tries again (as a failed marker append here)."""


async def write_txn_markers(connect: Callable[[str, int], Awaitable[trio.abc.Stream]], endpoint: tuple[str, int],
                            partitions: list[tuple[str, int]], producer_id: int,
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
            stream = await connect(*endpoint)
            async with stream:
                await stream.send_all(HELLO_HEAD.pack(MARKERS_MAGIC, VERSION)
                                      + bytes(request.encode(header=True, framed=True)))
                size = _SIZE.unpack(await receive_exactly(stream, 4))[0]
                frame = await receive_exactly(stream, size)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError) as exc:
        raise MarkersNotWritten(f"transaction markers to {endpoint[0]}:{endpoint[1]}: {exc!r}") from exc
    response = request.header.get_response_class().decode(frame, version=1, header=True)
    failed = [(t.name, p.partition_index, p.error_code) for m in response.markers for t in m.topics
              for p in t.partitions if p.error_code]
    if failed:
        raise MarkersNotWritten(f"transaction markers refused by {endpoint[0]}:{endpoint[1]}: {failed}")


async def serve_markers(broker: Broker, stream: trio.abc.Stream, version: int) -> None:
    """A WriteTxnMarkers request that came in on the replication port (after MARKERS_MAGIC and
    the version, which replication.serve_follower read): answered as a client listener answers
    it, by a node of the cluster (peer.node: ACLs do not apply to it)."""

    if version != VERSION:
        log.error("refused transaction markers from a node running replication version %d (this node: %d): "
                  "the cluster's nodes must run the same Gregor version", version, VERSION)
        return
    (size,) = _SIZE.unpack(await receive_exactly(stream, _SIZE.size))
    if not 0 < size <= MAX_FRAME:
        raise ProtocolError(f"transaction markers frame of {size} bytes")
    try:
        request = decode_request(await receive_exactly(stream, size))
    except MalformedRequest as exc:
        raise ProtocolError(f"transaction markers: {exc}") from exc
    if not isinstance(request, Request) or request.header.api_key != WriteTxnMarkersRequest.API_KEY:
        raise ProtocolError("only WriteTxnMarkers is taken on the replication port")
    peer.node.set(True)  # this task's context only
    body = await handle_write_txn_markers(broker, request)
    await stream.send_all(encode_response(request.header, body))
