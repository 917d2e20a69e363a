"""The broker each application test runs against: Gregor, then a real Apache Kafka 3.9.0, with the
same settings. A small cleaner backoff, so that Connect's compacted topics and Streams' changelog
are really cleaned while the applications run."""

from __future__ import annotations

import pytest

from tests.apps.kafka_apps import apps_libs
from tests.kit.both import GREGOR, KAFKA, started

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "log.cleaner.backoff.ms": "500"}


@pytest.fixture(params=[GREGOR, KAFKA])
def broker(request, tmp_path):
    apps_libs()  # skips before any broker starts
    (tmp_path / "broker").mkdir()
    with started(request.param, tmp_path / "broker", SETTINGS) as b:
        yield b
        (tmp_path / "broker.log").write_text(b.log())  # the broker's files go; a failed test's log stays
