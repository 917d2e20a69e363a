"""The real-Kafka launcher: what it says when the jars are missing, and the cluster ids it formats with."""

import base64

import pytest

from tests.kit.kafka import ARTIFACT, KafkaBroker, KafkaUnavailable, cluster_id


def test_unresolved_kafka_names_the_artifact_and_how_to_get_it(tmp_path):
    with pytest.raises(KafkaUnavailable) as refused:
        KafkaBroker(tmp_path / "kafka", version="0.0.0-not-resolved")
    assert f"{ARTIFACT}:0.0.0-not-resolved" in str(refused.value)
    assert "bin/setup-kafka" in str(refused.value)
    assert not (tmp_path / "kafka").exists()


def test_cluster_ids_are_kafka_uuids_that_never_look_like_an_option():
    ids = [cluster_id() for _ in range(2000)]  # about 31 of 2000 random ids would start with '-'
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
