"""FetchResponse v0-v18 body encoder that leaves the record batches where they are.

kafka-python's encoder wants each partition's records as one bytes object, so a
fetch used to copy every batch out of the commitlog's mmap (b"".join), again into
the encoded body, and a third time when the frame prefix was put in front. Profiles
of the consume benchmark put those copies at about two fifths of the broker's fetch
work. This encoder returns a list of buffers instead: the small fixed fields as
bytes, and every record batch as the memoryview the store handed out. The
connection writes the list with scatter-gather writev, so batch bytes go from
the page cache to the socket with no Python-level copy.

The layout is Kafka's FetchResponse.json; tests/protocol/test_fetch_response.py
checks the joined bytes against kafka-python's encoder for every version. Versions 0-3
carry down-converted message sets (protocol/down_convert.py), bytes rather than views. From v13
a topic is named by its id; from v16 the current leader of a partition that answers
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH and its node's endpoint ride in tagged fields.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from protocol.produce_response import _count, _string, _uvarint

try:
    from protocol._answers import fetch_topics as _c_topics
except ImportError:  # no C compiler at setup: the same loop in Python (_topics)
    _c_topics = None

FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13
MIN_VERSION, MAX_VERSION = 0, 18

Buffer = bytes | memoryview

_HEAD_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_I32 = struct.Struct(">i")
_PART_FIXED = struct.Struct(">ihqq")  # partition, error_code, high_watermark, last_stable_offset
_PART_V0 = struct.Struct(">ihq")  # v0-v3: partition, error_code, high_watermark
# v12+ with a null aborted list: partition, error_code, high_watermark, last_stable_offset, log_start_offset,
# the null list (uvarint 0), preferred_read_replica
_PART_V12_UNCOMMITTED = struct.Struct(">ihqqqBi")
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
# a partition's tagged fields holding tag 1, CurrentLeader: 1 field, tag 1, 9 bytes (leader_id, leader_epoch, no tags)
_CURRENT_LEADER = struct.Struct(">BBBiiB")


class PartitionResult(NamedTuple):
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]] | None
    preferred_read_replica: int
    records: Sequence[Buffer] | None  # the batches, in order; None is a null records field
    current_leader: tuple[int, int] | None = None  # v12+ tagged (leader_id, leader_epoch); None: not sent


def error_partition(partition: int, error_code: int, high_watermark: int = -1,
                    log_start_offset: int = -1,
                    aborted: list[tuple[int, int]] | None = None) -> PartitionResult:
    """A partition that answers an error: no records (an empty, not null, records field)."""
    return PartitionResult(partition, error_code, high_watermark, high_watermark, log_start_offset,
                           aborted, -1, ())


class NodeEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


def encode_fetch_response(version: int, topics: list[tuple[str | uuid.UUID, list[PartitionResult]]],
                          throttle_time_ms: int = 0, error_code: int = 0,
                          session_id: int = 0, node_endpoints: Sequence[NodeEndpoint] = ()) -> list[Buffer]:
    """The body as a list of buffers whose concatenation is the encoded response. A topic is its
    name up to v12 and its id (a UUID) from v13."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is not encoded here")
    flexible = version >= FLEXIBLE_FROM
    if version >= 7:
        head = _HEAD_V7.pack(throttle_time_ms, error_code, session_id)
    else:
        head = _I32.pack(throttle_time_ms) if version >= 1 else b""
    trailer = _node_endpoints(node_endpoints) if version >= 16 and node_endpoints else b"\x00" if flexible else b""
    return _encode_topics(version, head, topics, trailer)


def _topics(version: int, head: bytes, topics: list[tuple[str | uuid.UUID, list[PartitionResult]]],
            trailer: bytes) -> list[Buffer]:
    """`head`, the topics array, `trailer`: the loop once per partition of every fetch. Its twin in
    C, protocol/_answers.c, runs instead where the project's setup built it; both give the
    same buffers for the same answers (tests/protocol/test_fetch_response.py)."""
    flexible = version >= FLEXIBLE_FROM
    tags = b"\x00" if flexible else b""
    null = b"\x00" if flexible else b"\xff\xff\xff\xff"  # a null array or records field
    out: list[Buffer] = []
    head = bytearray(head)
    head += _count(len(topics), flexible)
    by_id = version >= TOPIC_IDS_FROM
    for topic, partitions in topics:
        head += topic.bytes if by_id else _string(topic, flexible)
        head += _count(len(partitions), flexible)
        for p in partitions:
            # one unpacking, not an attribute read per field: this runs once per partition
            partition, error, high_watermark, last_stable, log_start, aborted, preferred, records, leader = p
            if flexible and aborted is None:
                # v12+, read uncommitted (most answers): the fixed fields and the null aborted list in one pack
                head += _PART_V12_UNCOMMITTED.pack(partition, error, high_watermark, last_stable, log_start, 0,
                                                   preferred)
            elif version < 4:  # no transactions yet: no last stable offset, no aborted list
                head += _PART_V0.pack(partition, error, high_watermark)
            else:
                head += _PART_FIXED.pack(partition, error, high_watermark, last_stable)
                if version >= 5:
                    head += _I64.pack(log_start)
                if aborted is None:
                    head += null
                else:
                    head += _count(len(aborted), flexible)
                    for producer_id, first_offset in aborted:
                        head += _ABORTED.pack(producer_id, first_offset)
                        head += tags
                if version >= 11:
                    head += _I32.pack(preferred)
            if records is None:
                head += null
            else:
                size = sum(map(len, records))
                head += _uvarint(size + 1) if flexible else _I32.pack(size)
                if size:
                    out.append(bytes(head))
                    out.extend(records)
                    head = bytearray()
            if flexible and leader is not None:
                head += _CURRENT_LEADER.pack(1, 1, 9, leader[0], leader[1], 0)
            else:
                head += tags  # the partition's tagged fields: none
        head += tags
    head += trailer
    out.append(bytes(head))
    return out


_encode_topics = _c_topics or _topics


def _node_endpoints(nodes: Sequence[NodeEndpoint]) -> bytes:
    """The response's tagged fields holding tag 0, NodeEndpoints (v16+)."""
    field = bytearray(_count(len(nodes), True))
    for node in nodes:
        field += _I32.pack(node.node_id) + _string(node.host, True) + _I32.pack(node.port)
        field += _string(node.rack, True) + b"\x00"
    return b"\x01\x00" + _uvarint(len(field)) + bytes(field)
