"""ACL, topic-config, group-config and SCRAM credential changes sent to a follower are taken there, as Kafka
takes them at any broker (in ZooKeeper mode each broker writes them to ZooKeeper; in KRaft mode
it forwards them to the controller). The follower puts the change in ZooKeeper, its master
writes it into the group's commitlog, and the follower answers once it holds it by replication,
so what the client reads back at that node is what it wrote. Before, such a request at a
follower closed the connection."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.admin import NewTopic as ConfluentTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.metadata import MetadataRequest

from broker.handlers.group_configs import GROUP_RESOURCE

from tests.kit.wire import DELETE, INVALID_CONFIG, SET, WireClient, incremental, legacy
from tests.kit.wire import describe_configs as describe
from tests.kit.group import BrokerGroup, wait_described
from tests.cluster.security_calls import SETTINGS, _alter_users, _authenticates, _users
from tests.cluster.admin_calls import _topic_error, _until
from tests.security.acl_wire import (
    DENY,
    TOPIC_AUTHORIZATION_FAILED,
    Filter,
    create_acls,
    delete_acls,
    describe_acls,
    topic_acl,
)

DESCRIBE = 8
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def secured(tmp_path_factory, zookeeper):
    """One secured group for this module's two tests, which stop nothing and each change only
    their own topic ("kept", "seen") and user."""
    group = BrokerGroup(tmp_path_factory.mktemp("follower-admin"), zookeeper.connect + "/follower-admin", 3, "a",
                        dict(SETTINGS))
    group.start()
    yield group
    group.stop()


def test_a_follower_takes_acl_config_and_credential_changes(secured):
    group = secured
    master = group.master()
    follower, other = [n for n in group.nodes if n != master]
    plain = {n: node.listeners["PLAINTEXT"] for n, node in group.nodes.items()}
    sasl = {n: node.listeners["SASL_PLAINTEXT"] for n, node in group.nodes.items()}
    admin = KafkaAdminClient(bootstrap_servers=plain[master], request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic("kept", 1, -1)])
    finally:
        admin.close()
    wait_described(plain[master], "kept", 1)
    _until(lambda: _topic_error(plain[follower], "kept"), 0)

    client = WireClient(plain[follower])  # one connection for the ACL and config changes: it stays open
    try:
        # SCRAM credentials: the follower reads its own write back at once, every node has it
        dave = UserScramCredentialUpsertion("dave", "SCRAM-SHA-256", "dave-secret", iterations=4096)
        assert _alter_users(plain[follower], dave) == [("dave", 0)]
        assert "dave" in _users(plain[follower])
        for node in (master, other):
            _until(lambda node=node: "dave" in _users(plain[node]), True)
        for address in sasl.values():
            assert _authenticates(address, "dave", "dave-secret") == 0

        # ACLs: in force at the follower when answered, and at the master
        deny = topic_acl("kept", "User:ANONYMOUS", DESCRIBE, permission=DENY)
        assert [error for error, _ in create_acls(client, deny)] == [0]
        assert describe_acls(client)[2] == [deny]
        assert _topic_error(plain[follower], "kept") == TOPIC_AUTHORIZATION_FAILED
        _until(lambda: _topic_error(plain[master], "kept"), TOPIC_AUTHORIZATION_FAILED)
        assert delete_acls(client, Filter(name="kept"))[0][2] == [deny]
        assert describe_acls(client)[2] == []
        assert _topic_error(plain[follower], "kept") == 0
        _until(lambda: _topic_error(plain[master], "kept"), 0)

        # topic configs, incremental and legacy; a refused one changes nothing
        assert incremental(client, "kept", ("retention.ms", SET, "3600000")) == (0, None)
        assert describe(client, "kept", "retention.ms")["retention.ms"][0] == "3600000"
        master_client = WireClient(plain[master])
        try:
            _until(lambda: describe(master_client, "kept", "retention.ms")["retention.ms"][0], "3600000")
            assert incremental(client, "kept", ("retention.ms", SET, "-7"))[0] == INVALID_CONFIG
            assert legacy(client, "kept", {"max.message.bytes": "200000"}) == (0, None)
            assert describe(client, "kept", "retention.ms", "max.message.bytes") == \
                describe(master_client, "kept", "retention.ms", "max.message.bytes")
            assert describe(client, "kept", "max.message.bytes")["max.message.bytes"][0] == "200000"
            assert describe(client, "kept", "retention.ms")["retention.ms"][0] != "3600000"  # legacy replaces all
            assert incremental(client, "kept", ("max.message.bytes", DELETE, None)) == (0, None)
            _until(lambda: describe(master_client, "kept", "max.message.bytes")["max.message.bytes"][0],
                   describe(client, "kept", "max.message.bytes")["max.message.bytes"][0])
        finally:
            master_client.close()

        assert _alter_users(plain[follower], UserScramCredentialDeletion("dave", "SCRAM-SHA-256")) == [("dave", 0)]
        assert "dave" not in _users(plain[follower])
        for node in (master, other):
            _until(lambda node=node: "dave" in _users(plain[node]), False)
    finally:
        client.close()


def test_an_admin_client_bootstrapped_at_a_follower_changes_acls_and_configs(secured):
    """What a user of confluent-kafka sees with a follower as its one bootstrap server. This
    passed on the old code too: librdkafka sends these requests to any broker it is connected to
    and, when that connection closed, tried them again at another node. The test above, on one
    connection to a follower, is the one that failed."""
    group = secured
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    plain = {n: node.listeners["PLAINTEXT"] for n, node in group.nodes.items()}
    admin = AdminClient({"bootstrap.servers": plain[follower]})
    for future in admin.create_topics([ConfluentTopic("seen", num_partitions=1, replication_factor=-1)]).values():
        future.result(timeout=30)
    wait_described(plain[follower], "seen", 1)

    binding = AclBinding(ResourceType.TOPIC, "seen", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.DESCRIBE, AclPermissionType.DENY)
    for future in admin.create_acls([binding]).values():
        assert future.result(timeout=30) is None
    for node in group.nodes:
        _until(lambda node=node: _topic_error(plain[node], "seen"), TOPIC_AUTHORIZATION_FAILED)
    topic_filter = AclBindingFilter(ResourceType.TOPIC, "seen", ResourcePatternType.ANY, None, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    for future in admin.delete_acls([topic_filter]).values():
        assert future.result(timeout=30) == [binding]
    for node in group.nodes:
        _until(lambda node=node: _topic_error(plain[node], "seen"), 0)

    resource = ConfigResource(ResourceType.TOPIC, "seen", incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    for node in group.nodes:
        client = WireClient(plain[node])
        try:
            _until(lambda client=client: describe(client, "seen", "retention.ms")["retention.ms"][0], "7200000")
        finally:
            client.close()
    bad = ConfigResource(ResourceType.TOPIC, "seen", incremental_configs=[
        ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([bad]).values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            assert exc.args[0].code() == INVALID_CONFIG
        else:
            raise AssertionError("retention.ms=-7 was taken")



def test_a_metadata_request_at_a_follower_auto_creates_the_topic(calm_group):
    """Kafka auto-creates a topic a Metadata request names at any broker; a follower puts its
    record in ZooKeeper and the masters make it (before, only a request at a master did)."""
    group = calm_group
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    client = WireClient(group.address(follower))
    try:
        [topic] = client.request(MetadataRequest[4](topics=["made-here"], allow_auto_topic_creation=True)).topics
        assert topic.error_code == UNKNOWN_TOPIC_OR_PARTITION  # answered at once, made meanwhile
    finally:
        client.close()

    def leaders(address: str) -> list[int] | None:
        wire = WireClient(address)
        try:
            [found] = wire.request(MetadataRequest[4](topics=["made-here"], allow_auto_topic_creation=False)).topics
        finally:
            wire.close()
        return None if found.error_code else [p.leader_id for p in found.partitions]

    for node in group.nodes:
        _until(lambda node=node: leaders(group.address(node)), [master])


def _group_config(address: str, group: str, name: str) -> str | None:
    """A group config as DescribeConfigs on the GROUP resource answers it at one node."""
    client = WireClient(address)
    try:
        r = client.request(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=[name])],
            include_synonyms=False, include_documentation=False))
        return next((c.value for c in r.results[0].configs if c.name == name), None)
    finally:
        client.close()


def test_a_group_config_set_at_a_follower_is_in_force_at_every_broker_group(broker_group):
    """Group configs are cluster-wide, as Kafka keeps them: set at a follower of one broker group,
    the change goes to ZooKeeper as ACLs do, and every group's master writes it; the follower
    answers once it holds it."""
    a = broker_group(2, name="a")
    b = broker_group(2, name="b", first_id=3)
    follower = next(n for n in a.nodes if n != a.master())
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    client = WireClient(a.address(follower))
    try:
        answer = client.request(IncrementalAlterConfigsRequest[1](resources=[R(
            resource_type=GROUP_RESOURCE, resource_name="queue-workers",
            configs=[R.AlterableConfig(name="share.auto.offset.reset", config_operation=SET, value="earliest")])],
            validate_only=False)).responses[0]
    finally:
        client.close()
    assert (answer.error_code, answer.error_message) == (0, None)
    assert _group_config(a.address(follower), "queue-workers", "share.auto.offset.reset") == "earliest"
    for group in (a, b):
        for node in group.nodes:
            _until(lambda: _group_config(group.address(node), "queue-workers", "share.auto.offset.reset"),
                   "earliest", seconds=30)
