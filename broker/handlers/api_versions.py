"""ApiVersions: the advertised table, and KIP-511 client name checks."""

from __future__ import annotations

import re

from broker.broker import Broker
from protocol.api_versions import API_SPECS
from protocol.codec import Request
from protocol.errors import ErrorCode

# KIP-511: client software name and version must match this pattern.
SOFTWARE_PATTERN = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


async def handle_api_versions(broker: Broker, request: Request):
    response_cls = request.spec.response
    version = request.header.api_version
    body = request.body
    if version >= 3 and not (SOFTWARE_PATTERN.match(body.client_software_name or "")
                             and SOFTWARE_PATTERN.match(body.client_software_version or "")):
        return response_cls[version](error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    keys = [response_cls.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in sorted(API_SPECS.values(), key=lambda s: s.api_key)]
    return response_cls[version](error_code=0, api_keys=keys, throttle_time_ms=0)
