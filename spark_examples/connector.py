"""Where Spark's Kafka connector comes from, and a small local SparkSession that uses it.

The connector (spark-sql-kafka-0-10 plus its dependencies spark-token-provider-kafka-0-10,
kafka-clients and commons-pool2) is not in the pyspark wheel. It comes either from
SPARK_KAFKA_JARS, a comma-separated list of jar paths, or from a Maven repository through
`spark.jars.packages` (what `--packages` sets) when one is reachable. When neither is there,
`ConnectorUnavailable` says so, and what to do, instead of Spark failing deep inside Ivy.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from functools import cache

import pyspark
from pyspark.sql import SparkSession

SCALA_BINARY = "2.13"
PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{pyspark.__version__}"
_GROUP_PATH = "org/apache/spark"
_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA_BINARY}"
MAVEN_REPOSITORY = os.environ.get("SPARK_KAFKA_MAVEN_REPO", "https://repo1.maven.org/maven2")


class ConnectorUnavailable(RuntimeError):
    """Neither SPARK_KAFKA_JARS nor a reachable Maven repository provides the connector."""


def connector_jars() -> list[str]:
    """The jar paths in SPARK_KAFKA_JARS; a listed path that does not exist is an error."""
    paths = [p.strip() for p in os.environ.get("SPARK_KAFKA_JARS", "").split(",") if p.strip()]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ConnectorUnavailable(f"SPARK_KAFKA_JARS lists files that do not exist: {', '.join(missing)}")
    return paths


@cache
def maven_reachable(timeout_s: float = 5.0) -> tuple[bool, str]:
    """Whether the connector's POM for this pyspark version can be fetched; else the reason."""
    version = pyspark.__version__
    url = f"{MAVEN_REPOSITORY}/{_GROUP_PATH}/{_ARTIFACT}/{version}/{_ARTIFACT}-{version}.pom"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s):
            return True, ""
    except (urllib.error.URLError, OSError, ValueError) as e:
        return False, f"{url}: {e}"


def connector_conf() -> dict[str, str]:
    """Spark settings that put the connector on the classpath, or ConnectorUnavailable."""
    jars = connector_jars()
    if any(os.path.basename(j).startswith(_ARTIFACT) for j in jars):
        return {"spark.jars": ",".join(jars)}
    reachable, why = maven_reachable()
    if reachable:
        return {"spark.jars.packages": PACKAGE}
    raise ConnectorUnavailable(
        f"Spark's Kafka connector is not available: SPARK_KAFKA_JARS names no {_ARTIFACT}-*.jar "
        f"({len(jars)} jars listed) and the Maven repository is unreachable ({why}). Either run with "
        f"--packages {PACKAGE} where Maven is reachable, or set SPARK_KAFKA_JARS to the jars of "
        f"{_ARTIFACT}, spark-token-provider-kafka-0-10_{SCALA_BINARY}, kafka-clients and commons-pool2."
    )


def spark_session(app_name: str, master: str | None = None, with_connector: bool = True) -> SparkSession:
    """A SparkSession sized for a 2-core machine, bound to 127.0.0.1, with the Kafka connector
    (or ConnectorUnavailable) unless `with_connector` is False."""
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("SPARK_MASTER", "local[2]"))
        .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "2g"))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    for key, value in (connector_conf() if with_connector else {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return spark
