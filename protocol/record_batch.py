"""RecordBatch v2 header view: validate a batch without parsing its records.

Owns the fixed 61-byte batch header layout and the append-time checks a Kafka
broker makes (magic, CRC-32C, counts, size). Record-level parsing, only for
features that need it (tags, keys), goes through kafka-python's
`DefaultRecordBatch`, which already handles every codec. Never touches a socket.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from protocol.errors import ErrorCode

try:
    from protocol import _record_batch
except ImportError:  # no C compiler at setup: the Python checks alone (_validate)
    _record_batch = None

# baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
# attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
# producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_LENGTH = struct.Struct(">i")  # batchLength, at 8
LOG_OVERHEAD = 12  # baseOffset + batchLength precede the counted bytes
CRC_START = 21  # the CRC covers attributes .. end of batch
MAGIC_OFFSET = 16
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35
ATTRIBUTES_OFFSET = 21

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
CODEC_ZSTD = 4

# Kafka's EndTransactionMarker, the one record of a transaction marker (a control batch):
# key = version i16 (0) | type i16 (0 = ABORT, 1 = COMMIT); value = version i16 (0) | coordinator epoch i32
CONTROL_KEY = struct.Struct(">hh")
CONTROL_VALUE = struct.Struct(">hi")
ABORT_MARKER = 0
COMMIT_MARKER = 1
# the marker record: length, attributes, timestampDelta, offsetDelta, key length, key, value length,
# value, header count; every varint fits one byte (zigzag: 2n)
_MARKER_RECORD = struct.Struct(">bbbbb4sb6sb")


_crc32c = crc32c.crc32c


class InvalidBatch(Exception):
    """A batch a broker must refuse; carries the Kafka error code to answer with."""

    def __init__(self, error_code: ErrorCode, message: str, *, record_level: bool = False) -> None:
        super().__init__(message)
        self.error_code = error_code
        # Kafka finds these in LogValidator, after it has the log: its answer then carries the
        # partition's log start offset, where header-level refusals carry -1.
        self.record_level = record_level


class BatchHeader(NamedTuple):
    """The fixed header's fields, in layout order. A NamedTuple built from HEADER's unpack with
    tuple.__new__ (a C call): a frozen dataclass's __init__ cost 1.5 us of a produce request."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at INT32_MAX as Kafka does."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % 2**31


_unpack_header = HEADER.unpack_from
_new_tuple = tuple.__new__


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return _new_tuple(BatchHeader, _unpack_header(buf, pos))


def batch_spans(buf: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """(start, size) of each complete batch in a records blob; a partial tail is dropped."""
    spans = []
    pos, end = 0, len(buf)
    while end - pos >= LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        size = length + LOG_OVERHEAD
        if length <= 0 or pos + size > end:
            break
        spans.append((pos, size))
        pos += size
    return spans


def validate_produce_records(records: bytes | bytearray | memoryview | None,
                             max_message_bytes: int) -> BatchHeader:
    """Check one partition's produce records the way Kafka's LogValidator does.

    Returns the header of the single batch, or raises InvalidBatch with the code
    a Kafka 3.9 broker answers (see tests/conformance/reference/kafka-3.9.0, 04_produce_*).
    """
    if not records:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "produce request carried no record batch")
    size = len(records)
    # the checks in C for a batch that passes them (protocol/_record_batch.c); the Python ones say why one fails
    return _c_header(records, size, max_message_bytes, True) or _validate(records, size, max_message_bytes, True)


def validate_produce_head(head: bytes, size: int, max_message_bytes: int) -> BatchHeader:
    """validate_produce_records for a batch of `size` bytes of which only the header (`head`,
    HEADER_SIZE bytes) is at hand (a batch in a pipe, store/piped.py): every check but the
    CRC's, which the caller makes once the bytes are somewhere (Kafka checks the CRC between
    the baseOffset and the count; where this raises, the caller checks the whole batch with
    validate_produce_records for Kafka's order of errors)."""
    return _c_header(head, size, max_message_bytes, False) or _validate(head, size, max_message_bytes, False)


def _validate(records: bytes | bytearray | memoryview, size: int, max_message_bytes: int,
              check_crc: bool) -> BatchHeader:
    if size < LOG_OVERHEAD + 5:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "record batch shorter than its header")
    magic = records[MAGIC_OFFSET]
    if magic != 2:
        raise InvalidBatch(ErrorCode.UNSUPPORTED_VERSION if magic > 2 else ErrorCode.INVALID_RECORD,
                           f"record batch magic {magic}; produce v3+ requires magic 2")
    if size < HEADER_SIZE:  # the length field's checks first, as below, then this one
        (length,) = _LENGTH.unpack_from(records, 8)
        _check_length(length, size)
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "record batch shorter than its header")
    header = _new_tuple(BatchHeader, _unpack_header(records, 0))
    base_offset, length, _, _, crc, attributes, last_offset_delta, _, _, producer_id, _, base_sequence, count = header
    if length + LOG_OVERHEAD != size:
        _check_length(length, size)
    if size > max_message_bytes:
        raise InvalidBatch(ErrorCode.MESSAGE_TOO_LARGE,
                           f"record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
    if base_offset != 0:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "a produced batch must have baseOffset 0", record_level=True)
    if check_crc and _crc32c(memoryview(records)[CRC_START:]) != crc:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")
    if count <= 0 or last_offset_delta + 1 != count:
        raise InvalidBatch(ErrorCode.INVALID_RECORD,
                           "lastOffsetDelta + 1 must equal a positive record count", record_level=True)
    if attributes & CONTROL_BIT:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "clients may not produce control batches", record_level=True)
    if producer_id >= 0 and base_sequence < 0:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "idempotent batch without a base sequence")
    return header


def _no_c_header(records, size: int, max_message_bytes: int, check_crc: bool) -> None:
    return None


if _record_batch is not None:
    _record_batch.init(BatchHeader, _crc32c)
_c_header = _no_c_header if _record_batch is None else _record_batch.header


def _check_length(length: int, size: int) -> None:
    """Raise for a batchLength that does not cover exactly the bytes sent."""
    if length + LOG_OVERHEAD < size:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "produce v3+ allows exactly one record batch per partition")
    if length + LOG_OVERHEAD > size:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "record batch length exceeds the bytes sent")


def stamp_log_append_time(batch: bytearray, now_ms: int) -> None:
    """Rewrite a batch for a LogAppendTime topic: set the timestamp-type bit and
    maxTimestamp, then recompute the CRC (Kafka does the same)."""
    attributes = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_BIT
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">q", batch, MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[CRC_START:]))


def end_transaction_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                           timestamp_ms: int) -> bytearray:
    """A transaction marker as Kafka's MemoryRecords.withEndTransactionMarker writes it: a
    RecordBatch v2 with attributes transactional | control (0x30), baseOffset 0, baseSequence
    -1, both timestamps `timestamp_ms`, uncompressed, one record carrying the marker."""
    key = CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = CONTROL_VALUE.pack(0, coordinator_epoch)
    body = _MARKER_RECORD.size - 1
    out = bytearray(HEADER_SIZE + _MARKER_RECORD.size)
    _MARKER_RECORD.pack_into(out, HEADER_SIZE, 2 * body, 0, 0, 0, 2 * len(key), key, 2 * len(value), value, 0)
    HEADER.pack_into(out, 0, 0, len(out) - LOG_OVERHEAD, 0, 2, 0, TRANSACTIONAL_BIT | CONTROL_BIT, 0,
                     timestamp_ms, timestamp_ms, producer_id, producer_epoch, -1, 1)
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return out
