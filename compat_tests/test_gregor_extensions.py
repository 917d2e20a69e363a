"""GREGOR-ONLY: Gregor's own topic configs through each client's admin API.

Skipped against any other broker (detection: see conftest.py, `commitlog.segment.bytes` in
the broker's DescribeConfigs). Nothing here is a Kafka compatibility claim.
"""

from __future__ import annotations

import pytest

from compat_tests.conftest import wait_for_partitions


@pytest.fixture(autouse=True)
def _gregor_only(target) -> None:
    if not target.is_gregor:
        pytest.skip("Gregor extension: the broker under test is not Gregor")


def test_gregor_topic_configs_are_accepted_and_described(client, reference, name):
    client.create_topic(name, 1, {"key.index.enable": "true", "tag.header": "tag"})
    wait_for_partitions(reference, name, 1)
    configs = client.topic_configs(name)
    assert (configs["key.index.enable"], configs["tag.header"]) == ("true", "tag")
