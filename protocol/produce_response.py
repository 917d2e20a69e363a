"""ProduceResponse v0-v11 body encoder, written by hand.

kafka-python's generated encoder needs a tree of DataContainer objects per
response; building and walking it was about a fifth of the broker's CPU for a
small produce request, the most frequent request there is. The layout below is
Kafka's ProduceResponse.json; tests/protocol/test_produce_response.py checks the
bytes against kafka-python's encoder for every version.
"""

from __future__ import annotations

import struct

try:
    from protocol._answers import produce as _c_produce
except ImportError:  # no C compiler at setup: the Python encoder alone (_encode)
    def _c_produce(version: int, results: list, throttle_time_ms: int) -> None:
        return None

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


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]  # every uvarint below 128, made once


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:  # two bytes: a fetched partition's records of a few KiB (not the loop below)
        return bytes(((n & 0x7F) | 0x80, n >> 7))
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


# v5+: a partition's whole answer in one pack when it carries no error message (nearly
# always): index, error_code, base_offset, log_append_time, log_start_offset, then (v8+) an
# empty record_errors and a null error_message, and (v9+) empty tagged fields.
_PART_PLAIN_V5 = struct.Struct(">ihqqq")
_PART_PLAIN_V8 = struct.Struct(">ihqqqih")  # record_errors count 0, error_message length -1
_PART_PLAIN_V9 = struct.Struct(">ihqqqBBB")  # compact: record_errors 0+1, null message 0, no tags 0


def _plain_layout(version: int) -> tuple[struct.Struct, tuple] | None:
    if version >= FLEXIBLE_FROM:
        return _PART_PLAIN_V9, (1, 0, 0)
    if version >= 8:
        return _PART_PLAIN_V8, (0, -1)
    if version >= 5:
        return _PART_PLAIN_V5, ()
    return None


def encode_produce_response(version: int, results: Results, throttle_time_ms: int = 0) -> bytes:
    """The body. Answers without an error message (nearly all) are encoded by protocol/_answers.c where
    the project's setup built it (tests/protocol/test_produce_response.py gives both the same results)."""
    return _c_produce(version, results, throttle_time_ms) or _encode(version, results, throttle_time_ms)


def _encode(version: int, results: Results, throttle_time_ms: int = 0) -> bytes:
    """encode_produce_response in Python: the C encoder's twin, and every answer with an error message."""
    flexible = version >= FLEXIBLE_FROM
    tags = b"\x00" if flexible else b""
    plain = _plain_layout(version)
    pack_plain, trailer = (plain[0].pack, plain[1]) if plain is not None else (None, ())
    out = [_count(len(results), flexible)]
    for topic, partitions in results:
        out.append(_string(topic, flexible))
        out.append(_count(len(partitions), flexible))
        for index, error, base_offset, append_time, log_start, message in partitions:
            if message is None and pack_plain is not None:
                out.append(pack_plain(index, error, base_offset, append_time, log_start, *trailer))
                continue
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

