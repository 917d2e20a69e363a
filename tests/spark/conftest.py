"""One SparkSession per test run (local[2], 127.0.0.1), with Spark's Kafka connector when this
machine has it; `kafka_connector` skips a test loudly when it does not."""

from __future__ import annotations

import pytest

from spark_examples.connector import ConnectorUnavailable, connector_conf


def _connector() -> tuple[bool, str]:
    try:
        connector_conf()
        return True, ""
    except ConnectorUnavailable as e:
        return False, str(e)


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[test]'")
    from spark_examples.connector import spark_session

    available, _ = _connector()
    session = spark_session("gregor-tests", with_connector=available)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_connector() -> None:
    available, reason = _connector()
    if not available:
        pytest.skip(f"SKIPPED LOUDLY: Spark end-to-end test needs the Kafka connector. {reason}")
