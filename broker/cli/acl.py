"""`gregor acl add|list|remove`: ACL bindings over the Kafka protocol (CreateAcls, DescribeAcls,
DeleteAcls), as Kafka's kafka-acls does it, so they work against Apache Kafka too.

A binding allows or denies a principal an operation, from a host, on the resources a pattern
names (LITERAL: that name, PREFIXED: every name starting with it). `list` and `remove` take a
filter; `remove` with nothing to filter on would delete every binding, so it wants --all.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TextIO

import kafka.errors as Errors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from broker.cli.connect import CliError, admin_client, error_text, kafka_errors
from broker.cli.format import UsageError, as_json, table

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
# Kafka's operation names (kafka-acls --operation), matched without case, `_` or `-`
OPERATIONS = {op.name.replace("_", "").lower(): op for op in ACLOperation
              if op not in (ACLOperation.UNKNOWN, ACLOperation.ANY, ACLOperation.CREATE_TOKENS,
                            ACLOperation.DESCRIBE_TOKENS)}
OPERATION_NAMES = ("All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                   "AlterConfigs, IdempotentWrite")
# What each resource type supports besides All, as kafka-acls checks it (Kafka's AclEntry.supportedOperations)
SUPPORTED = {
    ResourceType.TOPIC: {ACLOperation.READ, ACLOperation.WRITE, ACLOperation.CREATE, ACLOperation.DESCRIBE,
                         ACLOperation.DELETE, ACLOperation.ALTER, ACLOperation.DESCRIBE_CONFIGS,
                         ACLOperation.ALTER_CONFIGS},
    ResourceType.GROUP: {ACLOperation.READ, ACLOperation.DESCRIBE, ACLOperation.DELETE,
                         ACLOperation.DESCRIBE_CONFIGS, ACLOperation.ALTER_CONFIGS},
    ResourceType.CLUSTER: {ACLOperation.CREATE, ACLOperation.CLUSTER_ACTION, ACLOperation.DESCRIBE_CONFIGS,
                           ACLOperation.ALTER_CONFIGS, ACLOperation.IDEMPOTENT_WRITE, ACLOperation.ALTER,
                           ACLOperation.DESCRIBE},
    ResourceType.TRANSACTIONAL_ID: {ACLOperation.DESCRIBE, ACLOperation.WRITE},
}
HEADERS = ("RESOURCE-TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
FIELDS = ("resource_type", "pattern_type", "resource_name", "principal", "host", "operation", "permission")


def parse_operations(text: str) -> list[ACLOperation]:
    """`Read,Write` (Kafka's names, any case) as operations."""
    found = []
    for name in text.split(","):
        op = OPERATIONS.get(name.strip().replace("_", "").replace("-", "").lower())
        if op is None:
            raise UsageError(f"unknown operation {name.strip()!r} (one of {OPERATION_NAMES})")
        found.append(op)
    return found


def parse_principal(text: str) -> str:
    """TYPE:NAME, as Kafka's tool checks a principal before sending it (User:alice)."""
    kind, sep, _ = text.partition(":")
    if not sep or not kind:
        raise UsageError(f"expected a principal TYPE:NAME such as User:alice, got {text!r}")
    return text


def parse_resource_name(text: str) -> str:
    if not text:
        raise UsageError("a resource name must not be empty")
    return text


def add(args: argparse.Namespace, out: TextIO) -> int:
    resource_type, name = _resource(args)
    operations = _unique(op for ops in args.operation for op in ops)
    unsupported = [op.name for op in operations if op != ACLOperation.ALL and op not in SUPPORTED[resource_type]]
    if unsupported:
        raise CliError(f"{resource_type.name} does not support {', '.join(unsupported)} (it supports ALL, "
                       f"{', '.join(sorted(op.name for op in SUPPORTED[resource_type]))})", status=2)
    pattern = ResourcePattern(resource_type, name, ACLResourcePatternType.PREFIXED if args.prefixed
                              else ACLResourcePatternType.LITERAL)
    permission = ACLPermissionType.DENY if args.deny else ACLPermissionType.ALLOW
    acls = [ACL(args.principal, args.host, op, permission, pattern) for op in operations]
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors("add ACLs"):
        result = admin.create_acls(acls)
    out.writelines(f"added ACL: {_text(acl)}\n" for acl in result["succeeded"])
    # kafka-python keeps each failure's code, but neither the broker's message nor which binding it was
    _raise_failures(admin, "add ACLs", result["failed"], needs="ALTER")
    return 0


def list_acls(args: argparse.Namespace, out: TextIO) -> int:
    found = []
    with admin_client(args.bootstrap, args.command_config) as admin:
        for acl_filter in _filters(args):
            with kafka_errors("list ACLs"):
                try:
                    acls, _ = admin.describe_acls(acl_filter)
                except (Errors.SecurityDisabledError, Errors.ClusterAuthorizationFailedError) as exc:
                    _raise_failures(admin, "list ACLs", [type(exc)], needs="DESCRIBE")
            found += acls
    rows = sorted({_row(acl) for acl in found})
    if args.output == "json":
        out.write(as_json([dict(zip(FIELDS, row)) for row in rows]))
    else:
        out.write(table(HEADERS, rows))
    return 0


def remove(args: argparse.Namespace, out: TextIO) -> int:
    filters = _filters(args)
    if args.all and not _selects_everything(filters):
        raise CliError("--all removes every ACL: give it without a principal, host, operation, permission "
                       "or resource", status=2)
    if not args.all and _selects_everything(filters):
        raise CliError("no filter given: this would remove every ACL; name a principal, resource, operation, "
                       "host or permission, or give --all", status=2)
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors("remove ACLs"):
        results = admin.delete_acls(filters)
    _raise_failures(admin, "remove ACLs", [error for _, _, error in results if error is not Errors.NoError],
                    needs="ALTER")
    removed = sorted({_row(acl) for _, acls, _ in results for acl in acls})
    if args.output == "json":
        out.write(as_json([dict(zip(FIELDS, row)) for row in removed]))
    elif removed:
        out.write(table(HEADERS, removed))
    else:
        out.write("no ACL matched: nothing removed\n")
    return 0


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _filters(args: argparse.Namespace) -> list[ACLFilter]:
    """One filter per --operation (one for any operation without it). Named resources match
    LITERAL patterns unless --prefixed or --match (the patterns that apply to the name), as
    kafka-acls' default; without a resource every pattern type matches."""
    resource_type, name = _resource(args)
    pattern = (ACLResourcePatternType.PREFIXED if args.prefixed else ACLResourcePatternType.MATCH if args.match
               else ACLResourcePatternType.LITERAL if name is not None else ACLResourcePatternType.ANY)
    permission = (ACLPermissionType.ALLOW if args.allow else ACLPermissionType.DENY if args.deny
                  else ACLPermissionType.ANY)
    resources = ResourcePatternFilter(resource_type, name, pattern)
    operations = _unique(op for ops in args.operation for op in ops) or [ACLOperation.ANY]
    return [ACLFilter(args.principal, args.host, op, permission, resources) for op in operations]


def _selects_everything(filters: list[ACLFilter]) -> bool:
    return any(f.principal is None and f.host is None and f.operation == ACLOperation.ANY
               and f.permission_type == ACLPermissionType.ANY
               and f.resource_pattern.resource_type == ResourceType.ANY
               and f.resource_pattern.pattern_type in (ACLResourcePatternType.ANY, ACLResourcePatternType.MATCH)
               for f in filters)


def _raise_failures(admin: KafkaAdminClient, action: str, errors: list[type], needs: str) -> None:
    """One line for the error codes of a refused ACL request, saying what to change where the code
    alone would not; `needs` is the operation on the cluster the request takes."""
    if not errors:
        return
    user = admin.config.get("sasl_plain_username")
    reasons = {Errors.SecurityDisabledError: "ACLs are off on this broker: set authorizer.class.name "
                                             "(SECURITY_DISABLED)",
               Errors.ClusterAuthorizationFailedError: f"not authorized: {f'User:{user}' if user else 'this client'} "
                                                       f"needs {needs} on the cluster (CLUSTER_AUTHORIZATION_FAILED)"}
    raise CliError(f"cannot {action}: {'; '.join(reasons.get(e) or error_text(e) for e in _unique(errors))}")


def _row(acl: ACL) -> tuple[str, ...]:
    pattern = acl.resource_pattern
    return (pattern.resource_type.name, pattern.pattern_type.name, pattern.resource_name, acl.principal, acl.host,
            acl.operation.name, acl.permission_type.name)


def _text(acl: ACL) -> str:
    rtype, pattern, name, principal, host, operation, permission = _row(acl)
    return f"{principal} {permission} {operation} on {rtype} {name} ({pattern}) from host {host}"


def _unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))
