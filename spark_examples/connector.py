"""Where Spark's Kafka connector comes from, and a small local SparkSession that uses it.

The connector (spark-sql-kafka-0-10 plus spark-token-provider-kafka-0-10, kafka-clients and
commons-pool2) is not in the pyspark wheel. `bin/setup-spark` (run by `bin/setup test` and by
`bin/spark-example`) resolves it with Maven from spark_examples/pom.xml into
.cache/spark-kafka/<pyspark version>/, and the session gets those jars through `spark.jars`: nothing
is downloaded when a job starts (no `spark.jars.packages`/`--packages`). SPARK_KAFKA_JARS, a
comma-separated list of jar paths, overrides the cache. When neither has the connector,
`ConnectorUnavailable` names the artifact and Maven's log instead of Spark failing on the first
`format("kafka")` with "Failed to find data source: kafka".
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

SCALA_BINARY = "2.13"
_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA_BINARY}"
ARTIFACT = f"org.apache.spark:{_ARTIFACT}:{pyspark.__version__}"
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "spark-kafka" / pyspark.__version__


class ConnectorUnavailable(RuntimeError):
    """Neither SPARK_KAFKA_JARS nor .cache/spark-kafka/ holds the connector for this pyspark."""


def connector_jars() -> list[str]:
    """The connector's jars: SPARK_KAFKA_JARS when set, else the ones bin/setup-spark resolved.
    A listed path that does not exist, or no spark-sql-kafka jar at all, is ConnectorUnavailable."""
    listed = os.environ.get("SPARK_KAFKA_JARS", "")
    if listed.strip():
        paths = [p.strip() for p in listed.split(",") if p.strip()]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise ConnectorUnavailable(f"SPARK_KAFKA_JARS lists files that do not exist: {', '.join(missing)}")
        where = "SPARK_KAFKA_JARS"
    else:
        paths = sorted(glob.glob(str(CACHE / "*.jar"))) if (CACHE / ".resolved").is_file() else []
        where = str(CACHE)
    if not any(os.path.basename(p).startswith(_ARTIFACT) for p in paths):
        log = CACHE.parent / f"{pyspark.__version__}.log"
        detail = log.read_text(errors="replace").strip()[-600:] if log.is_file() else "bin/setup-spark has not run"
        raise ConnectorUnavailable(
            f"Spark's Kafka connector {ARTIFACT} is not available: {where} has no {_ARTIFACT}-*.jar. "
            f"Run `bash bin/setup spark` (needs mvn and Maven Central), or set SPARK_KAFKA_JARS to the "
            f"jars of {_ARTIFACT}, spark-token-provider-kafka-0-10_{SCALA_BINARY}, kafka-clients and "
            f"commons-pool2. Maven said: {detail}"
        )
    return paths


def connector_conf() -> dict[str, str]:
    """Spark settings that put the connector on the classpath, or ConnectorUnavailable."""
    return {"spark.jars": ",".join(connector_jars())}


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
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    for key, value in (connector_conf() if with_connector else {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return spark
