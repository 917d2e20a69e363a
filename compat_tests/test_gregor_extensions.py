"""GREGOR-ONLY: Gregor's own topic configs through each client's admin API.

Skipped against any other broker (detection: see conftest.py, `commitlog.segment.bytes` in
the broker's DescribeConfigs). Nothing here is a Kafka compatibility claim.
"""

from __future__ import annotations

import pytest

from compat_tests.conftest import wait_on_every_node


@pytest.fixture(autouse=True)
def _gregor_only(target) -> None:
    if not target.is_gregor:
        pytest.skip("Gregor extension: the broker under test is not Gregor")


def test_gregor_topic_configs_are_accepted_and_described(client, reference, name, target):
    client.create_topic(name, 1, {"key.index.enable": "true", "tag.header": "tag"})
    wait_on_every_node(target, reference, name, 1)
    configs = client.topic_configs(name)
    assert (configs["key.index.enable"], configs["tag.header"]) == ("true", "tag")
