"""ApiVersions: the advertised table, the features (v3+, KIP-584), and KIP-511 client name checks
(Kafka's ApiVersionsResponse built by its ApiVersionManager)."""

from __future__ import annotations

import re

from broker.broker import Broker
from protocol.api_versions import API_SPECS, FINALIZED_FEATURES, FINALIZED_FEATURES_EPOCH, SUPPORTED_FEATURES
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
    if version < 3:
        return response_cls[version](error_code=0, api_keys=keys, throttle_time_ms=0)
    # below v4 Kafka leaves out a supported feature whose minimum level is 0 (KIP-1022): older
    # clients took a range starting at 0 for an error
    supported = [response_cls.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
                 for name, (lo, hi) in SUPPORTED_FEATURES.items() if version >= 4 or lo > 0]
    finalized = [response_cls.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
                 for name, level in FINALIZED_FEATURES.items()]
    return response_cls[version](error_code=0, api_keys=keys, throttle_time_ms=0, supported_features=supported,
                                 finalized_features_epoch=FINALIZED_FEATURES_EPOCH, finalized_features=finalized,
                                 zk_migration_ready=False)
