"""ApiVersions v3/v4 features (KIP-584) against Gregor and a real Apache Kafka 4.4.0: Gregor reports
the features whose protocol it serves at Kafka's levels, and leaves out the rest (docs/compatibility.md)."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.kit.both import GREGOR, KAFKA, connect, started

KAFKA_4 = "4.4.0"
pytestmark = [pytest.mark.kafka_version(KAFKA_4)]

# what Gregor serves: (supported min, max, finalized level)
SERVED = {"group.version": (0, 1, 1), "share.version": (0, 2, 2)}
# Kafka 4.4's other features, which Gregor does not report: KRaft's metadata and kraft versions,
# KIP-890 part 2 transactions, KIP-1071 streams groups, KIP-966's eligible leader replicas
KAFKA_ONLY = {"metadata.version", "kraft.version", "transaction.version", "streams.version",
              "eligible.leader.replicas.version"}


@pytest.fixture(scope="module", params=[GREGOR, KAFKA])
def broker(request, tmp_path_factory):
    with started(request.param, tmp_path_factory.mktemp(request.param), {}, in_process=True,
                 kafka_version=KAFKA_4) as b:
        c = connect(b)
        yield request.param, c
        c.close()


def _features(client, version: int):
    r = client.request(ApiVersionsRequest[version](client_software_name="gregor-tests", client_software_version="1"))
    assert r.error_code == 0
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
    return supported, finalized, r.finalized_features_epoch


def test_v4_reports_the_served_features_at_kafkas_levels(broker):
    kind, client = broker
    supported, finalized, epoch = _features(client, 4)
    others = KAFKA_ONLY if kind == KAFKA else set()
    assert set(supported) - others == set(SERVED) and set(finalized) - others <= set(SERVED)
    assert {n: supported[n] for n in SERVED} == {n: (lo, hi) for n, (lo, hi, _) in SERVED.items()}
    assert {n: finalized[n] for n in SERVED} == {n: (level, level) for n, (_, _, level) in SERVED.items()}
    assert epoch >= 0
    if kind == KAFKA:  # the level of transaction.version that would change the Java producer's protocol
        assert finalized["transaction.version"] == (2, 2)


def test_v3_leaves_out_supported_features_whose_minimum_is_zero(broker):
    kind, client = broker
    supported, finalized, _ = _features(client, 3)
    assert all(lo > 0 for lo, _ in supported.values())
    assert {n: finalized[n] for n in SERVED} == {n: (level, level) for n, (_, _, level) in SERVED.items()}


def test_the_finalized_features_epoch_never_goes_back(broker):
    _, client = broker
    first = _features(client, 4)[2]
    assert _features(client, 3)[2] >= first and _features(client, 4)[2] >= first
