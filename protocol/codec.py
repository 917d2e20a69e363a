"""Request decoding and response encoding, sans-IO.

A frame payload becomes a `Request` (header fields plus the kafka-python body
object); a response body becomes framed bytes with the right response header.
Schemas are kafka-python's (`kafka.protocol`), generated from Kafka's JSON
specs, so nothing here re-declares a message layout.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafka.protocol.metadata import ApiVersionsResponse

from protocol import fetch_request, produce_request
from protocol.api_versions import API_SPECS, API_VERSIONS_KEY, INTER_BROKER_SPECS, ApiSpec
from protocol.errors import ErrorCode

_FIXED_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")
_SIZE_AND_ID = struct.Struct(">ii")  # frame size, correlation_id
PRODUCE_KEY = 0
FETCH_KEY = 1
_FLEXIBLE: dict[tuple[int, int], bool] = {}  # (api key, version): flexible (KIP-482)?
_new = tuple.__new__


class MalformedRequest(Exception):
    """The frame cannot be understood; Kafka closes the connection."""


# The three below are NamedTuples, immutable as frozen dataclasses but made by a C call
# (tuple.__new__): the two dataclasses' __init__ cost 1 us of every request.
class RequestHeaderInfo(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool  # response header v1 (tagged fields) unless ApiVersions


class Request(NamedTuple):
    header: RequestHeaderInfo
    spec: ApiSpec
    body: Any  # a kafka-python request object (Produce v3+: protocol.produce_request's tuples)


class UnsupportedRequest(NamedTuple):
    """A well-formed header for an API or version Gregor does not serve."""

    header: RequestHeaderInfo
    known_api: bool


def peek_header(frame: bytes) -> tuple[int, int, int]:
    if len(frame) < _FIXED_HEADER.size:
        raise MalformedRequest(f"request header needs 8 bytes, frame has {len(frame)}")
    return _FIXED_HEADER.unpack_from(frame)


def decode_request(frame: bytes) -> Request | UnsupportedRequest:
    """Decode a frame payload. Raises MalformedRequest when Kafka would close."""
    api_key, api_version, _ = peek_header(frame)
    spec = API_SPECS.get(api_key) or INTER_BROKER_SPECS.get(api_key)
    if spec is None:
        # Kafka cannot parse a header for an API it does not know: it closes.
        raise MalformedRequest(f"unknown api key {api_key}")
    if not spec.min_version <= api_version <= spec.max_version:
        # ApiVersions newer than ours: parse the header as flexible (v2) and answer with v0 (KIP-511).
        flexible = api_key == API_VERSIONS_KEY and api_version > spec.max_version
        header, _ = _parse_header(frame, flexible)
        return UnsupportedRequest(header, known_api=True)
    flexible = _FLEXIBLE.get((api_key, api_version))
    if flexible is None:  # kafka-python's flexible_version_q, asked once per API and version
        flexible = _FLEXIBLE[(api_key, api_version)] = spec.flexible(api_version)
    header, pos = _parse_header(frame, flexible)
    try:
        if api_key == PRODUCE_KEY and api_version >= produce_request.MIN_VERSION:
            body = produce_request.decode_produce_request(memoryview(frame)[pos:], api_version)
        elif api_key == FETCH_KEY and api_version >= fetch_request.MIN_VERSION:
            body = fetch_request.decode_fetch_request(memoryview(frame)[pos:], api_version)
        else:
            body = spec.request.decode(memoryview(frame)[pos:], version=api_version)
    except Exception as exc:  # kafka-python raises assorted errors on short or bad input
        raise MalformedRequest(f"cannot decode {spec.name} v{api_version}: {exc!r}") from exc
    return _new(Request, (header, spec, body))


def locate_produce_records(payload: bytes | bytearray) -> tuple[int, int, int, int] | None:
    """For the start of a frame payload that is a Produce request v3+ of one topic and one
    partition: (its version, where its records' length field starts, where its records start,
    their length), positions in the payload; else None (another request, more partitions, or
    `payload` ends before the records). broker/net/splice.py receives such records into a pipe."""
    if len(payload) < _FIXED_HEADER.size:
        return None
    api_key, api_version, _ = _FIXED_HEADER.unpack_from(payload)
    if api_key != PRODUCE_KEY or not produce_request.MIN_VERSION <= api_version <= API_SPECS[PRODUCE_KEY].max_version:
        return None
    try:
        _, pos = _parse_header(payload, api_version >= produce_request.FLEXIBLE_FROM)
    except MalformedRequest:
        return None
    found = produce_request.locate_records(memoryview(payload)[pos:], api_version)
    if found is None:
        return None
    length_at, at, n = found
    return api_version, pos + length_at, pos + at, n


def _parse_header(frame: bytes, flexible: bool) -> tuple[RequestHeaderInfo, int]:
    """Request header v1 (v2 adds tagged fields). Parsed here rather than with kafka-python's
    RequestHeader: it runs for every request, and the generic schema walk over a BytesIO cost a
    tenth of a small produce request's time. The layout is fixed by KIP-482 and never changes."""
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame)
    pos = _FIXED_HEADER.size
    try:
        (length,) = _INT16.unpack_from(frame, pos)
        pos += 2
        client_id = None
        if length >= 0:
            if pos + length > len(frame):
                raise MalformedRequest("truncated client id")
            client_id = frame[pos:pos + length].decode("utf-8")
            pos += length
        if flexible and frame[pos] == 0:  # no tagged fields (none are defined for headers)
            pos += 1
        elif flexible:  # tagged fields: count, then (tag, size, bytes) each
            count, pos = _uvarint(frame, pos)
            for _ in range(count):
                _, pos = _uvarint(frame, pos)
                size, pos = _uvarint(frame, pos)
                pos += size
            if pos > len(frame):
                raise MalformedRequest("truncated header tagged fields")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MalformedRequest(f"truncated request header: {exc!r}") from exc
    info = _new(RequestHeaderInfo, (api_key, api_version, correlation_id, client_id,
                                    flexible and api_key != API_VERSIONS_KEY))
    return info, pos


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("unsigned varint longer than 5 bytes")


def encode_response(header: RequestHeaderInfo, body: Any) -> bytes | list:
    """Frame a response body with response header v0, or v1 (an empty tagged-field section)
    for flexible versions. The header is two fixed fields, written here; the body is
    kafka-python's encoder, or bytes already encoded (protocol.produce_response), or a list
    of buffers (protocol.fetch_response), which stays a list with the frame prefix in front."""
    if isinstance(body, list):
        prefix = _SIZE_AND_ID.pack(sum(map(len, body)) + 4 + header.flexible, header.correlation_id)
        return [prefix + b"\x00" if header.flexible else prefix, *body]
    if isinstance(body, bytes):
        payload = body
    else:
        body.API_VERSION = header.api_version
        payload = body.encode()
    prefix = _SIZE_AND_ID.pack(len(payload) + 4 + header.flexible, header.correlation_id)
    return prefix + (b"\x00" if header.flexible else b"") + payload


def unsupported_api_versions_response(header: RequestHeaderInfo) -> bytes:
    """ApiVersions for a version above ours: v0 body, error 35, our ApiVersions range."""
    spec = API_SPECS[API_VERSIONS_KEY]
    body = ApiVersionsResponse[0](
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS_KEY, min_version=spec.min_version,
                                                 max_version=spec.max_version)])
    body.with_header(correlation_id=header.correlation_id)
    return bytes(body.encode(header=True, framed=True))
