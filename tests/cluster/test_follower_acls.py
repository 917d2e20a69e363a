"""ACLs changed at the master are in force on its followers as soon as they are replicated there:
a follower answers Metadata, Fetch (follower fetching) and DescribeAcls itself, so it must judge
by the group's ACLs, not by the ones it had when it started. Before, a follower read its ACLs
only at start and when it became master: a revoked grant stayed in force on it."""

from __future__ import annotations


from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.kit.wire import WireClient
from tests.kit.group import wait_described
from tests.security.acl_wire import (
    DENY,
    TOPIC_AUTHORIZATION_FAILED,
    Filter,
    create_acls,
    delete_acls,
    describe_acls,
    topic_acl,
)
from tests.security.brokers import STANDARD_AUTHORIZER
from tests.cluster.admin_calls import _topic_error, _until

DESCRIBE = 8  # AclOperation DESCRIBE


def test_acls_changed_at_the_master_are_in_force_on_the_followers(broker_group):
    # PLAINTEXT: every client is User:ANONYMOUS; a resource no ACL names is open to it
    group = broker_group(3, **{"authorizer.class.name": STANDARD_AUTHORIZER,
                               "allow.everyone.if.no.acl.found": "true"})
    master = group.master()
    followers = [n for n in group.nodes if n != master]
    admin = KafkaAdminClient(bootstrap_servers=group.address(master), request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic("hidden", 1, -1)])
    finally:
        admin.close()
    wait_described(group.bootstrap, "hidden", 1)
    for node in followers:
        assert _topic_error(group.address(node), "hidden") == 0
    deny = topic_acl("hidden", "User:ANONYMOUS", DESCRIBE, permission=DENY)
    client = WireClient(group.address(master))
    try:
        assert [error for error, _ in create_acls(client, deny)] == [0]
        for node in followers:  # the follower's own answers change once the record reached it
            _until(lambda node=node: _topic_error(group.address(node), "hidden"), TOPIC_AUTHORIZATION_FAILED)
            follower = WireClient(group.address(node))
            try:
                assert describe_acls(follower)[2] == [deny]
            finally:
                follower.close()
        assert delete_acls(client, Filter(name="hidden"))[0][2] == [deny]
        for node in followers:
            _until(lambda node=node: _topic_error(group.address(node), "hidden"), 0)
    finally:
        client.close()
