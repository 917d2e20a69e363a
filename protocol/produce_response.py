"""ProduceResponse v0-v11 body encoder, written by hand.

kafka-python's generated encoder needs a tree of DataContainer objects per
response; building and walking it was about a fifth of the broker's CPU for a
small produce request, the most frequent request there is. The layout below is
Kafka's ProduceResponse.json; tests/protocol/test_produce_response.py checks the
bytes against kafka-python's encoder for every version.
"""

from __future__ import annotations

import struct

FLEXIBLE_FROM = 9
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_FIXED = struct.Struct(">ihq")  # index, error_code, base_offset
_I64 = struct.Struct(">q")

# (topic, [(partition, error_code, base_offset, log_append_time_ms, log_start_offset, error_message)])
Results = list[tuple[str, list[tuple[int, int, int, int, int, str | None]]]]


class RecordErrors(str):
    """An error message that also names the records at fault: Produce v8+ `record_errors`,
    (batch_index, batch_index_error_message) pairs. A str, so the usual path stays a str."""

    record_errors: tuple[tuple[int, str | None], ...] = ()

    @classmethod
    def of(cls, message: str, record_errors: list[tuple[int, str | None]]) -> RecordErrors:
        made = cls(message)
        made.record_errors = tuple(record_errors)
        return made


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = text.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def encode_produce_response(version: int, results: Results, throttle_time_ms: int = 0) -> bytes:
    flexible = version >= FLEXIBLE_FROM
    tags = b"\x00" if flexible else b""
    out = [_count(len(results), flexible)]
    for topic, partitions in results:
        out.append(_string(topic, flexible))
        out.append(_count(len(partitions), flexible))
        for index, error, base_offset, append_time, log_start, message in partitions:
            out.append(_PART_FIXED.pack(index, error, base_offset))
            if version >= 2:
                out.append(_I64.pack(append_time))
            if version >= 5:
                out.append(_I64.pack(log_start))
            if version >= 8:
                if message.__class__ is RecordErrors:
                    out.append(_count(len(message.record_errors), flexible))
                    for batch_index, text in message.record_errors:
                        out.append(_I32.pack(batch_index))
                        out.append(_string(text, flexible))
                        out.append(tags)
                else:
                    out.append(_count(0, flexible))  # record_errors
                out.append(_string(message, flexible))
            out.append(tags)
        out.append(tags)
    if version >= 1:
        out.append(_I32.pack(throttle_time_ms))
    out.append(tags)
    return b"".join(out)
