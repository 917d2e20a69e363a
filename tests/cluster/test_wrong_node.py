"""A follower's answers to what only its master serves, as a ZooKeeper-mode Kafka broker that is
not the controller or a partition's leader answers them: topic changes NOT_CONTROLLER, one per
topic, and DeleteRecords NOT_LEADER_OR_FOLLOWER, one per partition, on a connection that stays
open (clients look the controller or leader up again). Coordinator requests at the wrong node are
compat_tests/test_cluster_routing.py's, against Kafka too. ACL changes, which Kafka takes at any
broker, a follower takes too (tests/cluster/test_follower_admin.py)."""

from __future__ import annotations

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from tests.kit.wire import WireClient
from tests.kit.group import wait_described

NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, SECURITY_DISABLED = 41, 6, 54


def test_a_follower_answers_topic_changes_not_controller_and_delete_records_not_leader(calm_group):
    group = calm_group
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    admin = KafkaAdminClient(bootstrap_servers=group.address(follower), request_timeout_ms=20000)
    try:  # an admin client bootstrapped at a follower sends it to the controller Metadata names
        admin.create_topics([NewTopic("kept", 2, -1)])
    finally:
        admin.close()
    wait_described(group.bootstrap, "kept", 2)
    wire = WireClient(group.address(follower))
    try:
        Creatable = CreateTopicsRequest[4].CreatableTopic
        created = wire.request(CreateTopicsRequest[4](topics=[
            Creatable(name=t, num_partitions=1, replication_factor=-1, assignments=[], configs=[])
            for t in ("new-a", "new-b")], timeout_ms=10000, validate_only=False))
        assert [(t.name, t.error_code) for t in created.topics] == [("new-a", NOT_CONTROLLER),
                                                                   ("new-b", NOT_CONTROLLER)]
        deleted = wire.request(DeleteTopicsRequest[4](topic_names=["kept"], timeout_ms=10000))
        assert [(r.name, r.error_code) for r in deleted.responses] == [("kept", NOT_CONTROLLER)]
        Grown = CreatePartitionsRequest[1].CreatePartitionsTopic
        grown = wire.request(CreatePartitionsRequest[1](topics=[Grown(name="kept", count=4, assignments=None)],
                                                        timeout_ms=10000, validate_only=False))
        assert [(r.name, r.error_code) for r in grown.results] == [("kept", NOT_CONTROLLER)]
        Topic = DeleteRecordsRequest[1].DeleteRecordsTopic
        records = wire.request(DeleteRecordsRequest[1](topics=[Topic(name="kept", partitions=[
            Topic.DeleteRecordsPartition(partition_index=p, offset=-1) for p in (0, 1)])], timeout_ms=10000))
        assert [(p.partition_index, p.error_code) for t in records.topics for p in t.partitions] == \
            [(0, NOT_LEADER_OR_FOLLOWER), (1, NOT_LEADER_OR_FOLLOWER)]
        [kept] = wire.request(MetadataRequest[1](topics=["kept"])).topics  # the connection stayed open
        assert (kept.error_code, len(kept.partitions)) == (0, 2)  # and nothing changed
        Creation = CreateAclsRequest[1].AclCreation
        acls = wire.request(CreateAclsRequest[1](creations=[Creation(  # taken at a follower, as at any
            resource_type=2, resource_name="kept", resource_pattern_type=3, principal="User:x", host="*",
            operation=3, permission_type=3)]))  # Kafka broker (tests/cluster/test_follower_admin.py)
        assert [r.error_code for r in acls.results] == [SECURITY_DISABLED]  # no authorizer here
        assert wire.request(MetadataRequest[1](topics=["kept"])).topics[0].error_code == 0
    finally:
        wire.close()
