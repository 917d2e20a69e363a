"""Topic administration the Spark jobs need but Spark does not do: creating the source topic and a
Gregor tag-filtered view. Uses kafka-python's admin client over the plain Kafka protocol."""

from __future__ import annotations

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError


def ensure_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> bool:
    """Create `name` unless it exists; True when it was created. `configs` such as
    {"tag.header": "tag"} are Gregor's; leave them out against Apache Kafka."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-examples-admin")
    try:
        admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1,
                                    "configs": dict(configs or {})}})
        return True
    except TopicAlreadyExistsError:
        return False
    finally:
        admin.close()


def create_view(bootstrap: str, view: str, source: str, tags: list[str]) -> None:
    """A Gregor view: a read-only topic carrying only `source`'s records whose tag is in `tags`
    (the source must have been created with tag.header). Raises kafka-python's error when the
    broker refuses, e.g. InvalidConfigurationError from a broker without views."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-examples-admin")
    try:
        admin.create_topics({view: {"configs": {"view.source": source, "view.tags": ",".join(tags)}}})
    finally:
        admin.close()


def partitions_of(bootstrap: str, topic: str) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="spark-examples-metadata")
    try:
        return sorted(consumer.partitions_for_topic(topic) or [])
    finally:
        consumer.close()
