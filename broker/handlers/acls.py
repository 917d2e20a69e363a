"""DescribeAcls, CreateAcls and DeleteAcls (api keys 29, 30, 31) as Kafka 3.9 answers them.

The bindings are records of the state topic, written and fsynced before the answer, then put in
force (Broker.reload_acls). Without `authorizer.class.name` the three answer SECURITY_DISABLED, as
Kafka does without an authorizer. Listing needs Describe on the cluster, changing needs Alter.
"""

from __future__ import annotations

import logging

from broker.security.acl import (
    ACL_VALUE,
    CLUSTER_NAME,
    Acl,
    AclFilter,
    Op,
    Pattern,
    Res,
    creation_problem,
    principal_problem,
)
from broker.broker import Broker
from broker.net.peer import principal
from protocol.codec import MalformedRequest, Request
from protocol.errors import ErrorCode
from store import StoreError

log = logging.getLogger("gregor.acl")
NO_AUTHORIZER = "No Authorizer is configured."
UNKNOWN, ANY = 0, 1  # the enums' codes (ResourceType, PatternType, AclOperation, AclPermissionType)


def _refusal(broker: Broker, op: Op, request: Request) -> tuple[int, str] | None:
    if broker.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not broker.allowed(op, Res.CLUSTER, CLUSTER_NAME):  # Kafka's message names the request, as this one
        return (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"Request {request.spec.name} from {principal()} is not authorized.")
    return None


def _filter(f, version: int) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter (the same fields); v0 knows LITERAL only. A
    0 (UNKNOWN) in it is a request Kafka's classes refuse to parse: the connection closes."""
    pattern = f.pattern_type_filter if version >= 1 else Pattern.LITERAL
    if UNKNOWN in (f.resource_type_filter, pattern, f.operation, f.permission_type):
        raise MalformedRequest("an ACL filter with an UNKNOWN (0) field")
    return AclFilter(f.resource_type_filter, f.resource_name_filter,
                     f.pattern_type_filter if version >= 1 else Pattern.LITERAL,
                     f.principal_filter, f.host_filter, f.operation, f.permission_type)


async def _store(broker: Broker, records: list[tuple[bytes, bytes | None]]) -> str | None:
    """Write the binding changes durably and put them in force; the refusal's text on failure."""
    if not records:
        return None
    try:
        await broker.write_security(records)
    except StoreError as exc:
        log.error("ACL change refused: %s", exc)
        return f"ACL change not stored: {exc}"
    broker.reload_acls()
    return None


async def handle_describe_acls(broker: Broker, request: Request):
    version = request.header.api_version
    cls = request.spec.response[version]
    refusal = _refusal(broker, Op.DESCRIBE, request)
    if refusal is not None:
        return cls(throttle_time_ms=0, error_code=refusal[0], error_message=refusal[1], resources=[])
    flt = _filter(request.body, version)
    grouped: dict[tuple[int, str, int], list[Acl]] = {}
    for acl in [] if flt.problem() else broker.current_acls().matching(flt):  # an unknown code matches nothing
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl)
    resources = [cls.DescribeAclsResource(
        resource_type=rtype, resource_name=name, pattern_type=pattern,
        acls=[cls.DescribeAclsResource.AclDescription(principal=a.principal, host=a.host, operation=a.operation,
                                                      permission_type=a.permission) for a in acls])
        for (rtype, name, pattern), acls in grouped.items()]
    return cls(throttle_time_ms=0, error_code=0, error_message="", resources=resources)


async def handle_create_acls(broker: Broker, request: Request):
    version = request.header.api_version
    cls = request.spec.response[version]
    creations = request.body.creations
    refusal = _refusal(broker, Op.ALTER, request)
    if refusal is not None:
        return cls(throttle_time_ms=0, results=[cls.AclCreationResult(error_code=refusal[0], error_message=refusal[1])
                                                for _ in creations])
    acls = [Acl(c.resource_type, c.resource_name, c.resource_pattern_type if version >= 1 else Pattern.LITERAL,
                c.principal, c.host, c.operation, c.permission_type) for c in creations]
    if any(UNKNOWN in (a.resource_type, a.pattern, a.operation, a.permission) for a in acls):
        # Kafka's CreateAclsRequest refuses to parse it ("CreatableAcls contain unknown elements"): it closes
        raise MalformedRequest("CreateAcls with an UNKNOWN (0) resource type, pattern type, operation or permission")
    unbuildable = next((a for a in acls if ANY in (a.resource_type, a.operation, a.permission)
                        or a.pattern in (Pattern.ANY, Pattern.MATCH)), None)
    if unbuildable is not None:
        # Kafka cannot build such a binding (ResourcePattern/AccessControlEntry refuse ANY and MATCH):
        # the whole request fails with UNKNOWN_SERVER_ERROR and no message, nothing is stored
        log.info("CreateAcls from %s refused: a binding with ANY or MATCH (%s)", principal(), unbuildable)
        return cls(throttle_time_ms=0, results=[cls.AclCreationResult(
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=None) for _ in creations])
    results, records = [], []
    for acl in acls:
        problem = creation_problem(acl) or principal_problem(acl.principal)
        if problem is None:
            records.append((acl.key(), ACL_VALUE))
            log.info("%s adds ACL %s", principal(), acl)
        results.append(problem)
    failure = await _store(broker, records)

    def result(problem: str | None):
        if problem:
            return cls.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
        if failure:
            return cls.AclCreationResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=failure)
        return cls.AclCreationResult(error_code=0, error_message="")

    return cls(throttle_time_ms=0, results=[result(p) for p in results])


async def handle_delete_acls(broker: Broker, request: Request):
    version = request.header.api_version
    cls = request.spec.response[version]
    Result = cls.DeleteAclsFilterResult
    filters = request.body.filters
    refusal = _refusal(broker, Op.ALTER, request)
    if refusal is not None:
        return cls(throttle_time_ms=0, filter_results=[Result(error_code=refusal[0], error_message=refusal[1],
                                                              matching_acls=[]) for _ in filters])
    answers: list[tuple[str | None, list[Acl]]] = []
    gone: dict[bytes, None] = {}
    for f in filters:
        flt = _filter(f, version)
        problem = flt.problem()
        matched = [] if problem else broker.current_acls().matching(flt)
        for acl in matched:
            gone[acl.key()] = None
            log.info("%s deletes ACL %s", principal(), acl)
        answers.append((problem, matched))
    failure = await _store(broker, [(key, None) for key in gone])
    results = []
    for problem, matched in answers:
        if problem or failure:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST if problem else ErrorCode.KAFKA_STORAGE_ERROR,
                                  error_message=problem or failure, matching_acls=[]))
            continue
        results.append(Result(error_code=0, error_message=None, matching_acls=[Result.DeleteAclsMatchingAcl(
            error_code=0, error_message=None, resource_type=a.resource_type, resource_name=a.name,
            pattern_type=a.pattern, principal=a.principal, host=a.host, operation=a.operation,
            permission_type=a.permission) for a in matched]))
    return cls(throttle_time_ms=0, filter_results=results)
