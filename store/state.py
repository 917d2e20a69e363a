"""Gregor's durable state as records in the commitlog (format version 1).

Owns the internal topic `__gregor_state` (one partition, a fixed topic id, never shown to
clients) and the compacted view of it: topic metadata, committed offsets, the producer-id
block and the producer-state snapshot are records with a key and a value, appended to the
commitlog like any batch, so a crash recovers them and a follower receives them by the same
path as data (RocketMQ keeps everything a broker knows in its commitlog; Kafka keeps offsets
in `__consumer_offsets` and metadata in `__cluster_metadata`). A null value deletes its key.
The latest value of every key is kept in memory; before retention deletes a commitlog
segment, the store appends the live records that segment holds again (`Store._carry_state`),
so the newest value of every key always survives and the topic stays as small as its live
keys plus what retention has not yet reached.

Record keys (bytes), big-endian:
  b"T" + topic name (UTF-8)                          topic metadata
  b"O" + u16 len + group + u16 len + topic + i32 p   a committed offset
  b"P\\x01"                                          end of the reserved producer-id block
  b"P\\x02"                                          the producer-state snapshot
  b"E" + i32 epoch                                   a broker group's master epoch and its start position
Values start with a version byte (1); see encode_topic / encode_offset and docs/storage.md.
Never does I/O: the Store appends the batches this module encodes and feeds back what it reads.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Iterator

from kafka.record.default_records import DefaultRecordBatchBuilder

from store.records import decode
from store.topics import TopicMeta

STATE_TOPIC = "__gregor_state"
STATE_TOPIC_ID = uuid.UUID("6772656f-7200-4000-8000-000000000001")  # fixed: every broker has it
STATE_META = TopicMeta(STATE_TOPIC, 1, {"key.index.enable": "false"}, STATE_TOPIC_ID)
VALUE_VERSION = 1
STATE_CHUNK = 10_000  # state records per batch when many are written at once (migration, carrying)

TOPIC, OFFSET, PRODUCER = b"T", b"O", b"P"
CREDENTIAL = b"C"  # + u8 SCRAM mechanism (1: SHA-256, 2: SHA-512) + UTF-8 user: broker/security/sasl.py's value
PRODUCER_IDS = b"P\x01"
PRODUCER_SNAPSHOT = b"P\x02"
# the first byte of every other kind of key (each documented in docs/storage.md, The state topic):
ACL = b"A"  # + an ACL binding (broker/security/acl.py)
TRANSACTION = b"x"  # + UTF-8 transactional id: the coordinator's record of it (broker/txn/state.py)
PENDING_OFFSET = b"o"  # + producer id (i64) + an offset key: a TxnOffsetCommit awaiting its transaction's end
# + producer id (i64) + producer epoch (i16) + an offset key: the same, where another broker group's
# master coordinates the transaction (broker/txn/coordinator.py, `stage_group_offsets`)
GROUP_PENDING_OFFSET = b"q"
MASTER_EPOCH = b"E"  # + i32 epoch: where in the commitlog a master of the broker group began it (replication)
BROKER_CONFIG = b"B"  # + i32 node id + UTF-8 setting name: a broker's dynamic setting, its UTF-8 value (broker/security/dynamic_tls.py)
# + u16 len + UTF-8 group + u16 len + UTF-8 topic + i32 partition: a share-partition's start offset and
# in-flight records' states and delivery counts (broker/groups/share_partition.py `encode`)
SHARE_PARTITION = b"S"
# + u16 len + UTF-8 group + UTF-8 setting name: a group's config (IncrementalAlterConfigs on a GROUP), UTF-8 value
GROUP_CONFIG = b"K"
CONSUMER_GROUP = b"G"  # + UTF-8 group id: a consumer-protocol group's epochs, members and assignments (broker/groups/consumer_group.py)

_U16 = struct.Struct(">H")
_TOPIC_HEAD = struct.Struct(">B16siH")  # version, topic id, partitions, config count
_OFFSET_VALUE = struct.Struct(">Bqii")  # version, offset, leader epoch, metadata length (-1: null)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Record = tuple[bytes, bytes | None]


class StateFormatError(ValueError):
    """A state record this version cannot read (a newer Gregor wrote it)."""


def _string(value: str) -> bytes:
    data = value.encode()
    return _U16.pack(len(data)) + data


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _U16.unpack_from(buf, pos)
    return buf[pos + 2:pos + 2 + n].decode(), pos + 2 + n


# ---- topics ---------------------------------------------------------------------------
def topic_key(name: str) -> bytes:
    return TOPIC + name.encode()


def encode_topic(meta: TopicMeta) -> bytes:
    """version u8 | topic id 16 | partitions i32 | count u16 | (u16 len name, u16 len value)*"""
    items = sorted(meta.configs.items())
    return b"".join([_TOPIC_HEAD.pack(VALUE_VERSION, meta.topic_id.bytes, meta.partitions, len(items)),
                     *(_string(k) + _string(v) for k, v in items)])


def decode_topic(name: str, value: bytes) -> TopicMeta:
    version, topic_id, partitions, count = _TOPIC_HEAD.unpack_from(value, 0)
    if version != VALUE_VERSION:
        raise StateFormatError(f"topic record of {name} has format {version}; this Gregor reads {VALUE_VERSION}")
    pos, configs = _TOPIC_HEAD.size, {}
    for _ in range(count):
        k, pos = _read_string(value, pos)
        configs[k], pos = _read_string(value, pos)
    return TopicMeta(name, partitions, configs, uuid.UUID(bytes=topic_id))


# ---- committed offsets ----------------------------------------------------------------
def group_prefix(group: str) -> bytes:
    return OFFSET + _string(group)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return group_prefix(group) + _string(topic) + _I32.pack(partition)


def split_offset_key(key: bytes) -> tuple[str, str, int]:
    group, pos = _read_string(key, 1)
    topic, pos = _read_string(key, pos)
    return group, topic, _I32.unpack_from(key, pos)[0]


def encode_offset(offset: int, metadata: str | None, leader_epoch: int) -> bytes:
    """version u8 | offset i64 | leader epoch i32 | metadata length i32 (-1: null) | metadata"""
    meta = b"" if metadata is None else metadata.encode()
    return _OFFSET_VALUE.pack(VALUE_VERSION, offset, leader_epoch, -1 if metadata is None else len(meta)) + meta


def decode_offset(value: bytes) -> tuple[int, str | None, int]:
    version, offset, epoch, mlen = _OFFSET_VALUE.unpack_from(value, 0)
    if version != VALUE_VERSION:
        raise StateFormatError(f"offset record has format {version}; this Gregor reads {VALUE_VERSION}")
    metadata = None if mlen < 0 else value[_OFFSET_VALUE.size:_OFFSET_VALUE.size + mlen].decode()
    return offset, metadata, epoch


# ---- producer ids ---------------------------------------------------------------------
def encode_i64(value: int) -> bytes:
    return bytes([VALUE_VERSION]) + _I64.pack(value)


def decode_i64(value: bytes) -> int:
    if value[0] != VALUE_VERSION:
        raise StateFormatError(f"producer-id record has format {value[0]}; this Gregor reads {VALUE_VERSION}")
    return _I64.unpack_from(value, 1)[0]


# ---- batches --------------------------------------------------------------------------
def encode_batch(records: Iterable[Record], now_ms: int) -> bytes:
    """One uncompressed RecordBatch v2 (kafka-python's builder), base offset 0, as a producer
    would send it: the store assigns offsets, and every tool that reads batches reads it."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=now_ms, key=key, value=value, headers=[])
    return bytes(builder.build())


def credential_key(mechanism: int, user: str) -> bytes:
    """The state key of a user's SCRAM credential for one mechanism (Kafka's type: 1 = SCRAM-SHA-256,
    2 = SCRAM-SHA-512)."""
    return CREDENTIAL + bytes([mechanism]) + user.encode()


def decode_batch(batch: bytes | bytearray | memoryview, base_offset: int) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of each record of a state batch whose first record is at
    `base_offset` (the batch's own baseOffset field is 0 when it was just encoded, and the
    stored offset once it is in the commitlog: only the records' deltas are used)."""
    records = decode(batch)
    first = records.base_offset
    for record in records:
        yield (base_offset + record.offset - first, bytes(record.key),
               None if record.value is None else bytes(record.value))


class StateView:
    """The latest value of every state key, applied in commitlog order, and the typed views
    built from it: topics into the registry, offsets into the offset store. Applied by the
    store under its state lock (writes) or by recovery (one thread)."""

    def __init__(self, registry, offsets) -> None:
        self.registry = registry
        self.offsets = offsets
        self.live: dict[bytes, tuple[int, bytes]] = {}  # key -> (offset of its record, value)
        # moves at every ACL record applied: a node whose ACLs arrive by replication (a follower)
        # puts them in force when it sees it move (Broker.allowed)
        self.acl_changes = 0
        self.group_config_changes = 0  # the same for group configs (broker/groups/share_coordinator.py)
        self.broker_config_changes = 0  # ... and dynamic broker settings (Broker.refresh_dynamic)

    def value(self, key: bytes) -> bytes | None:
        found = self.live.get(key)
        return None if found is None else found[1]

    def apply_batch(self, batch: bytes | bytearray | memoryview, base_offset: int) -> int:
        """Apply a stored state batch; returns how many records it held."""
        count = 0
        for offset, key, value in decode_batch(batch, base_offset):
            self.apply(offset, key, value)
            count += 1
        return count

    def reset(self) -> None:
        """Forget everything (recovery starts over from the commitlog)."""
        self.live.clear()
        self.registry.clear()
        self.offsets.clear()
        self.acl_changes += 1
        self.group_config_changes += 1
        self.broker_config_changes += 1

    def apply(self, offset: int, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.live.pop(key, None)
        else:
            self.live[key] = (offset, value)
        kind = key[:1]
        if kind == TOPIC:
            name = key[1:].decode()
            self.registry.apply(name, None if value is None else decode_topic(name, value))
        elif kind == OFFSET:
            group, topic, partition = split_offset_key(key)
            self.offsets.apply(group, topic, partition, None if value is None else decode_offset(value))
        elif kind == ACL:
            self.acl_changes += 1
        elif kind == GROUP_CONFIG:
            self.group_config_changes += 1
        elif kind == BROKER_CONFIG:
            self.broker_config_changes += 1

    def live_below(self, offset: int) -> list[Record]:
        """The live records stored below `offset`, oldest first: what must be written again
        before the commitlog bytes holding them are deleted."""
        found = sorted((at, key, value) for key, (at, value) in self.live.items() if at < offset)
        return [(key, value) for _, key, value in found]  # oldest first: a partial carry frees the most


# ---- master epochs (replication) --------------------------------------------------------
_EPOCH_VALUE = struct.Struct(">Bq")  # version, commitlog position the epoch begins at


def encode_master_epoch(epoch: int, start: int) -> Record:
    return MASTER_EPOCH + _I32.pack(epoch), _EPOCH_VALUE.pack(VALUE_VERSION, start)


def decode_master_epoch(key: bytes, value: bytes) -> tuple[int, int]:
    """(epoch, start position) of a MASTER_EPOCH record."""
    return _I32.unpack_from(key, 1)[0], _EPOCH_VALUE.unpack_from(value)[1]
