"""Request decoding and response encoding, sans-IO.

A frame payload becomes a `Request` (header fields plus the kafka-python body
object); a response body becomes framed bytes with the right response header.
Schemas are kafka-python's (`kafka.protocol`), generated from Kafka's JSON
specs, so nothing here re-declares a message layout.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import ApiVersionsResponse

from protocol.api_versions import API_SPECS, API_VERSIONS_KEY, ApiSpec
from protocol.errors import ErrorCode

_FIXED_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id


class MalformedRequest(Exception):
    """The frame cannot be understood; Kafka closes the connection."""


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool  # response header v1 (tagged fields) unless ApiVersions


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeaderInfo
    spec: ApiSpec
    body: Any  # a kafka-python request object


@dataclass(frozen=True, slots=True)
class UnsupportedRequest:
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
    spec = API_SPECS.get(api_key)
    if spec is None:
        # Kafka cannot parse a header for an API it does not know: it closes.
        raise MalformedRequest(f"unknown api key {api_key}")
    if not spec.min_version <= api_version <= spec.max_version:
        # ApiVersions newer than ours: parse the header as flexible (v2) and answer with v0 (KIP-511).
        flexible = api_key == API_VERSIONS_KEY and api_version > spec.max_version
        header, _ = _parse_header(frame, flexible)
        return UnsupportedRequest(header, known_api=True)
    flexible = spec.flexible(api_version)
    header, pos = _parse_header(frame, flexible)
    try:
        body = spec.request.decode(memoryview(frame)[pos:], version=api_version)
    except Exception as exc:  # kafka-python raises assorted errors on short or bad input
        raise MalformedRequest(f"cannot decode {spec.name} v{api_version}: {exc!r}") from exc
    return Request(header, spec, body)


def _parse_header(frame: bytes, flexible: bool) -> tuple[RequestHeaderInfo, int]:
    data = io.BytesIO(frame)
    try:
        raw = RequestHeader.decode(data, flexible=flexible)
    except Exception as exc:
        raise MalformedRequest(f"truncated request header: {exc!r}") from exc
    if data.tell() > len(frame):
        raise MalformedRequest("truncated request header")
    info = RequestHeaderInfo(raw.request_api_key, raw.request_api_version, raw.correlation_id,
                             raw.client_id, flexible and raw.request_api_key != API_VERSIONS_KEY)
    return info, data.tell()


def encode_response(header: RequestHeaderInfo, body: Any) -> bytes:
    """Frame a response body with response header v0, or v1 for flexible versions."""
    body.API_VERSION = header.api_version  # before with_header(): kafka-python's setter assumes a request header
    body.with_header(correlation_id=header.correlation_id)
    return bytes(body.encode(header=True, framed=True))


def unsupported_api_versions_response(header: RequestHeaderInfo) -> bytes:
    """ApiVersions for a version above ours: v0 body, error 35, our ApiVersions range."""
    spec = API_SPECS[API_VERSIONS_KEY]
    body = ApiVersionsResponse[0](
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS_KEY, min_version=spec.min_version,
                                                 max_version=spec.max_version)])
    body.with_header(correlation_id=header.correlation_id)
    return bytes(body.encode(header=True, framed=True))
