"""Where the connector comes from: the jars bin/setup-spark resolved, SPARK_KAFKA_JARS, or a clear
ConnectorUnavailable naming the artifact (what the end-to-end tests' skip reason shows)."""

from __future__ import annotations

import pyspark
import pytest

from spark_examples import connector


def test_resolved_jars_are_handed_to_spark_through_spark_jars(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setattr(connector, "CACHE", tmp_path)
    names = [f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar", "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(connector.ConnectorUnavailable):  # not resolved yet: no .resolved stamp
        connector.connector_conf()
    (tmp_path / ".resolved").write_text("x")
    conf = connector.connector_conf()
    assert set(conf) == {"spark.jars"}  # never spark.jars.packages: nothing is downloaded at run time
    assert sorted(conf["spark.jars"].split(",")) == sorted(str(tmp_path / n) for n in names)


def test_missing_connector_names_the_artifact_and_maven_log(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setattr(connector, "CACHE", tmp_path / "4.2.0")
    (tmp_path / "4.2.0.log").write_text("[ERROR] Could not resolve dependencies")
    with pytest.raises(connector.ConnectorUnavailable) as raised:
        connector.connector_jars()
    message = str(raised.value)
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}" in message
    assert "Could not resolve dependencies" in message and "bash bin/setup spark" in message


def test_spark_kafka_jars_overrides_the_cache(tmp_path, monkeypatch):
    jar = tmp_path / "spark-sql-kafka-0-10_2.13-x.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("SPARK_KAFKA_JARS", f"{jar}, ")
    assert connector.connector_jars() == [str(jar)]
    monkeypatch.setenv("SPARK_KAFKA_JARS", f"{jar},{tmp_path / 'gone.jar'}")
    with pytest.raises(connector.ConnectorUnavailable, match="gone.jar"):
        connector.connector_jars()
