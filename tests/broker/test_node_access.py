"""broker/cluster/access.py: the replication port's own failed-login count, and which open
connections lose ClusterAction when the ACLs change."""

from __future__ import annotations

import trio

from broker.security.auth_limit import FailedAuthentications
from broker.cluster.access import NodeAccess


def test_open_connections_are_checked_again_once_per_change_of_the_acls():
    access = NodeAccess(FailedAuthentications(10, 60_000))
    node, other = trio.CancelScope(), trio.CancelScope()
    access.opened(node, "User:node", "10.0.0.2")
    access.opened(other, "User:other", "10.0.0.3")
    allowed = {"User:node", "User:other"}
    assert access.revoked(1, lambda principal, host: principal in allowed) == []
    allowed.discard("User:other")
    assert access.revoked(1, lambda principal, host: principal in allowed) == [], "no change of the ACLs: not asked"
    assert access.revoked(2, lambda principal, host: principal in allowed) == [(other, "User:other", "10.0.0.3")]
    assert access.revoked(3, lambda principal, host: False) == [(node, "User:node", "10.0.0.2")], \
        "a revoked connection is returned once"
    access.opened(other, "User:other", "10.0.0.3")
    access.closed(other)
    assert access.revoked(4, lambda principal, host: False) == [], "a closed connection is forgotten"


def test_failed_logins_refuse_the_address_at_the_limit_and_no_other():
    access = NodeAccess(FailedAuthentications(2, 60_000))
    access.record_failure("10.0.0.9", 1_000)
    assert access.refusal("10.0.0.9", 1_001) is None
    access.record_failure("10.0.0.9", 2_000)
    refusal = access.refusal("10.0.0.9", 2_001)
    assert refusal is not None and refusal.first
    assert access.refusal("10.0.0.2", 2_001) is None
    assert access.refusal("10.0.0.9", 61_000) is None, "the oldest failure left the window"
