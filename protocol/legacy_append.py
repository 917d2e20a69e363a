"""Produce v0-v2 message sets (magic 0 and 1) checked and rebuilt as one RecordBatch v2.

Kafka 3.9 writes only RecordBatch v2 (message.format.version is ignored since 3.0), so a
legacy message set is checked the way its UnifiedLog and LogValidator check one, and its
records become a v2 batch with offsets 0..n-1 (the store assigns the real ones): magic 0
records get timestamp -1 (NO_TIMESTAMP), magic 1 records keep theirs (the records of a
wrapper stamped LogAppendTime take the wrapper's), and the batch is compressed with the
topic's compression.type ("producer": the wrapper's codec). The caller then checks the
rebuilt batch as any v2 batch (size against max.message.bytes, as Kafka re-checks it).

kafka-python reads each message (LegacyRecordBatch: key, value, timestamp, CRC), inflates
wrapped sets (kafka.codec, with the LZ4 framing quirk of magic 0) and builds the batch
(DefaultRecordBatchBuilder). The walk over a set's messages is written here: Kafka's answers
depend on what kafka-python's reader does not expose (each message's own magic and
attributes, a partial trailing message, lengths that run past the message, the wrapper
offset). The error codes were measured against Kafka 3.9 (tests/broker/test_old_formats.py).
Per-record Python work, about 10 us a record (a 1 MB set of 10,000 records: ~0.1 s); only
producers of Produce v0-v2 cause it, and the produce handler runs it in a worker thread, so the
event loop gets the GIL between turns. Sans-IO: bytes in, bytes out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kafka import codec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch

from protocol.errors import ErrorCode
from protocol.record_batch import InvalidBatch

# offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | (magic 1: timestamp i64) |
# key length i32 | key | value length i32 | value        -- the CRC covers magic .. end
MESSAGE_HEAD = struct.Struct(">qiIbb")
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
LOG_OVERHEAD = 12  # offset and size precede the counted bytes
MAGIC_OFFSET = 16
MIN_MESSAGE_SIZE = 14  # Kafka's RECORD_OVERHEAD_V0: crc, magic, attributes, key and value lengths
KEY_OFFSET = (18, 26)  # by magic
CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # magic 1: LogAppendTime
NO_TIMESTAMP = -1
ZSTD = 4
_UNLIMITED = 1 << 62  # a builder size limit no batch reaches: Kafka's own limits are checked here

COMPRESSION_TYPES = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": ZSTD}  # "producer": kept


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a set, as its header says (an unread key and value)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    data: memoryview  # the whole message, log overhead included

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic == 1 and bool(self.attributes & TIMESTAMP_TYPE_BIT)


def is_legacy(records: bytes | memoryview) -> bool:
    """Whether Produce v0-v2 records hold a message set rather than a RecordBatch v2 (whose
    magic byte sits where a message's does)."""
    return len(records) <= MAGIC_OFFSET or records[MAGIC_OFFSET] != 2


def messages(buf: bytes | memoryview) -> Iterator[Message]:
    """The complete messages of a set, in order, as Kafka's log input stream reads them: a
    partial message at the end is dropped, a size below the minimum or an unknown magic is
    CORRUPT_MESSAGE."""
    buf = memoryview(buf)
    pos, end = 0, len(buf)
    while end - pos >= LOG_OVERHEAD:
        offset, size = struct.unpack_from(">qi", buf, pos)
        if size < MIN_MESSAGE_SIZE:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE,
                               f"message size {size} is less than the minimum record overhead")
        if end - pos <= MAGIC_OFFSET:
            return
        magic = buf[pos + MAGIC_OFFSET]
        if magic > 2:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"invalid magic {magic} in a message set")
        if end - pos < LOG_OVERHEAD + size:
            return
        data = buf[pos:pos + LOG_OVERHEAD + size]
        attributes = buf[pos + MAGIC_OFFSET + 1]
        timestamp = NO_TIMESTAMP
        if magic == 1 and size >= MIN_MESSAGE_SIZE + 8:
            (timestamp,) = _TIMESTAMP.unpack_from(buf, pos + MAGIC_OFFSET + 2)
        yield Message(offset, magic, attributes, timestamp, data)
        pos += LOG_OVERHEAD + size


def to_record_batch(records: bytes | memoryview, max_message_bytes: int, compression_type: str,
                    log_append_time_topic: bool, keys_required: bool) -> bytearray | None:
    """The records as one RecordBatch v2, or None when the set holds no complete message
    (Kafka appends nothing and answers NONE with offset -1). Raises InvalidBatch with Kafka's
    error code. `keys_required`: a compacted topic refuses records without a key."""
    shallow = []
    for message in messages(records):  # UnifiedLog.analyzeAndValidateRecords, message by message
        if len(message.data) > max_message_bytes:
            raise InvalidBatch(ErrorCode.MESSAGE_TOO_LARGE,
                               f"message of {len(message.data)} bytes exceeds max.message.bytes {max_message_bytes}")
        if message.magic < 2 and not LegacyRecordBatch(message.data, message.magic).validate_crc():
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"message at offset {message.offset}: CRC-32 mismatch")
        shallow.append(message)
    if not shallow:
        return None
    source_codec = next((m.codec for m in reversed(shallow) if m.codec), 0)
    if source_codec and len(shallow) > 1:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "a compressed message set must be one wrapper message")
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=COMPRESSION_TYPES.get(compression_type, source_codec),
                                        is_transactional=False, producer_id=-1, producer_epoch=-1,
                                        base_sequence=-1, batch_size=_UNLIMITED)
    delta = 0
    for message in shallow:  # LogValidator: each message (or wrapper) is a batch of its own
        if message.magic != shallow[0].magic or message.magic == 2:  # a v2 batch goes alone
            raise InvalidBatch(ErrorCode.INVALID_RECORD,
                               f"messages of magic {shallow[0].magic} and {message.magic} in one set")
        errors = []  # record errors fail the batch once all its records are seen; CRC errors at once
        for index, record in enumerate(_unwrapped(message) if message.codec else [message]):
            checked = _record(record, message, index, log_append_time_topic, keys_required)
            if checked.__class__ is str:
                errors.append(checked)
            elif not errors:
                builder.append(delta, *checked, [])
                delta += 1
        if errors:
            code = ErrorCode.INVALID_TIMESTAMP if TIMESTAMP_ERROR in errors else ErrorCode.INVALID_RECORD
            raise InvalidBatch(code, f"{len(errors)} record error(s): {errors[:3]}", record_level=True)
    return builder.build()


def _unwrapped(wrapper: Message) -> list[Message]:
    """The messages inside a compressed wrapper (Kafka's deep iteration of a legacy batch)."""
    if wrapper.codec == ZSTD:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "zstd is not a codec of message format v0/v1")
    if wrapper.codec > ZSTD:
        # Kafka fails to look the codec up and answers its generic error
        raise InvalidBatch(ErrorCode.UNKNOWN_SERVER_ERROR, f"unknown codec {wrapper.codec}")
    value = _value(wrapper)
    if value is None:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "compressed wrapper message with a null value")
    try:
        data = _inflate(wrapper.codec, wrapper.magic, bytes(value))
    except Exception as exc:  # noqa: BLE001 - each codec library raises its own errors
        # Kafka wraps the codec's IOException in a KafkaException: UNKNOWN_SERVER_ERROR
        raise InvalidBatch(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot decompress the wrapped set: {exc!r}") from None
    inner = list(messages(data))
    if not inner:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "compressed wrapper message with no messages inside")
    last = inner[-1].offset
    if wrapper.magic == 1 and wrapper.offset != 0 and wrapper.offset < last:
        # a v1 wrapper carries the offset of its last message (0 from some librdkafka versions)
        raise InvalidBatch(ErrorCode.INVALID_RECORD, f"wrapper offset {wrapper.offset} is below the last inner "
                           f"offset {last} and not 0")
    return inner


def _inflate(kind: int, magic: int, value: bytes) -> bytes:
    if kind == 1:
        return codec.gzip_decode(value)
    if kind == 2:
        return codec.snappy_decode(value)
    # Kafka before 0.10 computed the LZ4 frame's header checksum over the wrong bytes; Kafka reads
    # magic 0 frames without checking it, as kafka-python's old-kafka decoder does
    return codec.lz4_decode_old_kafka(value) if magic == 0 else codec.lz4_decode(value)


TIMESTAMP_ERROR = "a producer may not stamp LogAppendTime"


def _record(record: Message, wrapper: Message, index: int, log_append_time_topic: bool, keys_required: bool,
            ) -> tuple[int, bytes | None, bytes | None] | str:
    """(timestamp, key, value) of one record, or the text of its record error (LogValidator's
    record checks, in its order); raises for the errors Kafka throws at once."""
    if record is not wrapper:
        if record.codec:
            return f"record {index} inside a compressed set is compressed"
        if record.magic != wrapper.magic:
            return f"record {index} has magic {record.magic} inside a magic {wrapper.magic} wrapper"
        if not LegacyRecordBatch(record.data, record.magic).validate_crc():
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"record {index} of the compressed set: CRC-32 mismatch")
    _value(record)  # lengths that do not fit fail before anything reads them
    item = next(iter(LegacyRecordBatch(record.data, record.magic)))
    if keys_required and item.key is None:
        return "Compacted topic cannot accept message without key"
    timestamp = record.timestamp
    if wrapper.log_append_time and record is not wrapper:
        timestamp = wrapper.timestamp  # a wrapper stamped LogAppendTime gives its time to its records
    if wrapper.log_append_time and (log_append_time_topic or timestamp == NO_TIMESTAMP):
        return TIMESTAMP_ERROR
    if timestamp < NO_TIMESTAMP:
        raise InvalidBatch(ErrorCode.UNKNOWN_SERVER_ERROR, f"negative timestamp {timestamp}")  # as Kafka's builder
    return timestamp, item.key, item.value


def _value(message: Message) -> memoryview | None:
    """The message's value, once its key and value lengths are known to fit the message.
    kafka-python's reader trusts them; Kafka fails with its generic error when they do not."""
    data = message.data
    pos = KEY_OFFSET[message.magic]
    size = -1
    for _ in range(2):  # key, then value
        if pos + 4 > len(data):
            raise InvalidBatch(ErrorCode.UNKNOWN_SERVER_ERROR, "message shorter than its key and value lengths")
        (size,) = _LENGTH.unpack_from(data, pos)
        if size < -1 or pos + 4 + max(size, 0) > len(data):
            raise InvalidBatch(ErrorCode.UNKNOWN_SERVER_ERROR, f"key or value length {size} runs past the message")
        pos += 4 + max(size, 0)
    return None if size < 0 else data[pos - size:pos]
