"""ACL bindings on the wire with tests/broker/wire.WireClient: CreateAcls, DescribeAcls and DeleteAcls
(v3) as plain values, and the waits an ACL change needs. Kafka's StandardAuthorizer learns of a
change through its metadata log, so `grant` and `revoke` return once DescribeAcls (answered from the
same authorizer state the checks use) shows it; Gregor shows it at once."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourceType
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from tests.kit.wire import WireClient

NONE, UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_OR_PARTITION = 0, -1, 3
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
INVALID_REQUEST, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 42, 53

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                           ResourceType.TRANSACTIONAL_ID)
LITERAL, PREFIXED = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
ALLOW, DENY = ACLPermissionType.ALLOW, ACLPermissionType.DENY
ANY = 1  # the ANY of resource types, pattern types, operations and permissions (filters only)
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, order=True)
class Binding:
    """One ACL: who may (or may not) do what to which resources, from where."""
    resource_type: int
    name: str
    principal: str
    operation: int
    permission: int = ALLOW
    pattern: int = LITERAL
    host: str = "*"

    def creation(self) -> CreateAclsRequest.AclCreation:
        return CreateAclsRequest.AclCreation(
            resource_type=self.resource_type, resource_name=self.name, resource_pattern_type=self.pattern,
            principal=self.principal, host=self.host, operation=self.operation, permission_type=self.permission)


@dataclass(frozen=True)
class Filter:
    """Which bindings DescribeAcls and DeleteAcls select; the defaults select every one."""
    resource_type: int = ANY
    name: str | None = None
    pattern: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY

    def fields(self) -> dict:
        return {"resource_type_filter": self.resource_type, "resource_name_filter": self.name,
                "pattern_type_filter": self.pattern, "principal_filter": self.principal,
                "host_filter": self.host, "operation": self.operation, "permission_type": self.permission}


def topic_acl(name: str, principal: str, operation: ACLOperation, **more) -> Binding:
    return Binding(TOPIC, name, principal, operation, **more)


def group_acl(name: str, principal: str, operation: ACLOperation, **more) -> Binding:
    return Binding(GROUP, name, principal, operation, **more)


def cluster_acl(principal: str, operation: ACLOperation, **more) -> Binding:
    return Binding(CLUSTER, CLUSTER_NAME, principal, operation, **more)


def create_acls(client: WireClient, *bindings: Binding) -> list[tuple[int, str | None]]:
    """(error_code, error_message) per binding, in order."""
    answer = client.request(CreateAclsRequest[3](creations=[b.creation() for b in bindings]))
    return [(r.error_code, r.error_message) for r in answer.results]


def describe_acls(client: WireClient, acl_filter: Filter = Filter()) -> tuple[int, str | None, list[Binding]]:
    """(error_code, error_message, the bindings found, sorted: Kafka answers in no fixed order)."""
    answer = client.request(DescribeAclsRequest[3](**acl_filter.fields()))
    return answer.error_code, answer.error_message, sorted(
        Binding(r.resource_type, r.resource_name, a.principal, a.operation, a.permission_type, r.pattern_type, a.host)
        for r in answer.resources for a in r.acls)


def delete_acls(client: WireClient, *filters: Filter) -> list[tuple[int, str | None, list[Binding]]]:
    """(error_code, error_message, the bindings deleted, sorted) per filter, in order."""
    answer = client.request(DeleteAclsRequest[3](filters=[DeleteAclsRequest.DeleteAclsFilter(**f.fields())
                                                          for f in filters]))
    return [(r.error_code, r.error_message,
             sorted(Binding(m.resource_type, m.resource_name, m.principal, m.operation, m.permission_type,
                            m.pattern_type, m.host) for m in r.matching_acls))
            for r in answer.filter_results]


def wait_for_acls(client: WireClient, present: set[Binding], absent: set[Binding] = frozenset(),
                  seconds: float = 15) -> None:
    """Until DescribeAcls shows every binding of `present` and none of `absent`."""
    deadline = time.monotonic() + seconds
    while True:
        found = set(describe_acls(client)[2])
        if present <= found and not absent & found:
            return
        assert time.monotonic() < deadline, f"ACLs not in effect after {seconds}s: missing {present - found}, " \
                                            f"still there {absent & found}"
        time.sleep(0.05)


def grant(address: str, *bindings: Binding) -> None:
    """Create `bindings` as a super user (ANONYMOUS on the PLAINTEXT listener at `address`) and wait
    until they are in effect."""
    client = WireClient(address)
    try:
        assert create_acls(client, *bindings) == [(NONE, "")] * len(bindings)
        wait_for_acls(client, set(bindings))
    finally:
        client.close()


def revoke(address: str, *bindings: Binding) -> None:
    """Delete exactly `bindings` as a super user and wait until they are gone."""
    client = WireClient(address)
    try:
        exact = [Filter(b.resource_type, b.name, b.pattern, b.principal, b.host, b.operation, b.permission)
                 for b in bindings]
        assert [(code, deleted) for code, _, deleted in delete_acls(client, *exact)] == [
            (NONE, [b]) for b in bindings]
        wait_for_acls(client, set(), set(bindings))
    finally:
        client.close()


def create_topics(address: str, *names: str, partitions: int = 1) -> None:
    """Topics created as a super user, returned once Metadata shows each with its partitions (Kafka's
    broker learns of a new topic through its metadata log after CreateTopics answers)."""
    client = WireClient(address)
    try:
        T = CreateTopicsRequest.CreatableTopic
        answer = client.request(CreateTopicsRequest[5](topics=[
            T(name=n, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]) for n in names],
            timeout_ms=10000, validate_only=False))
        assert [(t.name, t.error_code) for t in answer.topics] == [(n, NONE) for n in names]
        deadline = time.monotonic() + 15
        while not all(len(t.partitions) == partitions and t.error_code == NONE
                      for t in metadata(client, list(names), auto_create=False).topics):
            assert time.monotonic() < deadline, f"topics {names} not in Metadata after 15s"
            time.sleep(0.05)
    finally:
        client.close()


def metadata(client: WireClient, topics: list[str] | None, auto_create: bool = False):
    """Metadata v12 for `topics` (None: every topic), with each topic's authorized operations."""
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return client.request(MetadataRequest[12](topics=wanted, allow_auto_topic_creation=auto_create,
                                              include_topic_authorized_operations=True))
