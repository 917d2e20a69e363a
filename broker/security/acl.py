"""ACLs as Kafka's StandardAuthorizer judges them, sans-IO (issue 20).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry (principal, host,
operation, ALLOW or DENY). `Authorizer.authorize` answers one action the way Kafka 3.9's
StandardAuthorizerData does:

- a super user (`super.users`) may do everything;
- the ACLs that apply are those on the resource's type whose pattern matches its name (LITERAL
  equal, LITERAL "*", PREFIXED a prefix of the name), whose principal is the caller's or "User:*"
  and whose host is the caller's address or "*";
- a DENY for the operation (or ALL) wins; else an ALLOW for it (or ALL, or one that implies it:
  READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS);
- with no ACL on the resource at all (any principal, any operation), `allow.everyone.if.no.acl.found`
  decides; with ACLs on it but none for the caller, the answer is no.

The bindings are durable records of the state topic (store/state.py: key "A" + the binding, value a
version byte), so they are recovered, retained and replicated with the commitlog; the broker keeps
this object in step with them (broker/handlers/acls.py). Kafka's AclBindingFilter matching, used by
DescribeAcls and DeleteAcls, is `AclFilter.matches`.

Written here rather than taken from a library: no Python package implements Kafka's authorizer;
kafka-python only carries the request classes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from store.state import ACL

ACL_PREFIX = ACL  # state topic key prefix
ACL_VALUE = b"\x01"  # value format version; a tombstone deletes the binding
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")


class Op(IntEnum):
    UNKNOWN, ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, \
        ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = range(15)


class Res(IntEnum):
    UNKNOWN, ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = range(8)


class Pattern(IntEnum):
    UNKNOWN, ANY, MATCH, LITERAL, PREFIXED = range(5)


class Perm(IntEnum):
    UNKNOWN, ANY, DENY, ALLOW = range(4)


IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})

# What Kafka's authorizedOperations reports per resource type (Metadata, DescribeGroups, DescribeCluster).
SUPPORTED_OPS = {
    Res.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                Op.ALTER_CONFIGS),
    Res.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Res.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                  Op.ALTER, Op.DESCRIBE),
    Res.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
}

_HEAD = struct.Struct(">BBBBB")  # format version, resource type, pattern type, operation, permission


def _pack(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: int
    name: str
    pattern: int
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:  # as Kafka's authorizer log writes a binding
        return (f"{self.principal} has {_name(Perm, self.permission)} permission for operation "
                f"{_name(Op, self.operation)} from host {self.host} on "
                f"{_name(Res, self.resource_type)}:{_name(Pattern, self.pattern)}:{self.name}")

    def key(self) -> bytes:
        """The state-topic key of this binding (docs/storage.md, The state topic)."""
        return (ACL_PREFIX + _HEAD.pack(1, self.resource_type, self.pattern, self.operation, self.permission)
                + _pack(self.name) + _pack(self.principal) + _pack(self.host))

    @classmethod
    def from_key(cls, key: bytes) -> Acl:
        _, rtype, pattern, op, perm = _HEAD.unpack_from(key, 1)
        pos, texts = 1 + _HEAD.size, []
        for _ in range(3):
            (n,) = struct.unpack_from(">H", key, pos)
            texts.append(key[pos + 2:pos + 2 + n].decode())
            pos += 2 + n
        return cls(rtype, texts[0], pattern, texts[1], texts[2], op, perm)

    def verdict(self, principals: tuple[str, str], host: str, op: int) -> int | None:
        """Perm.ALLOW or Perm.DENY when this ACL speaks to the action, else None (findResult)."""
        if self.principal not in principals or (self.host != WILDCARD and self.host != host):
            return None
        if self.operation != Op.ALL:
            if self.permission == Perm.ALLOW:
                if op == Op.DESCRIBE:
                    if self.operation not in IMPLIES_DESCRIBE:
                        return None
                elif op == Op.DESCRIBE_CONFIGS:
                    if self.operation not in IMPLIES_DESCRIBE_CONFIGS:
                        return None
                elif op != self.operation:
                    return None
            elif op != self.operation:
                return None
        return self.permission


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: ANY and None match everything; MATCH finds the patterns that
    would apply to the named resource."""

    resource_type: int
    name: str | None
    pattern: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def problem(self) -> str | None:
        """Kafka's validateFilter: an UNKNOWN (or a code Kafka does not know) in the pattern or
        entry filter."""
        if _unknown(Res, self.resource_type) or _unknown(Pattern, self.pattern):
            return "Unknown patternFilter."
        if _unknown(Op, self.operation) or _unknown(Perm, self.permission):
            return "Unknown entryFilter."
        return None

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != Res.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern not in (Pattern.ANY, Pattern.MATCH) and self.pattern != acl.pattern:
            return False
        if self.name is not None:
            if self.pattern in (Pattern.ANY, acl.pattern):
                if self.name != acl.name:
                    return False
            elif acl.pattern == Pattern.LITERAL:
                if self.name != acl.name and acl.name != WILDCARD:
                    return False
            elif not (acl.pattern == Pattern.PREFIXED and self.name.startswith(acl.name)):
                return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == Op.ANY or self.operation == acl.operation)
                and (self.permission == Perm.ANY or self.permission == acl.permission))


def creation_problem(acl: Acl) -> str | None:
    """Why CreateAcls refuses a binding (INVALID_REQUEST), in Kafka's words; None when valid."""
    if acl.resource_type == Res.CLUSTER and acl.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.name:
        return "Invalid empty resource name"
    if _unknown(Res, acl.resource_type) or acl.resource_type == Res.ANY:
        return f"Invalid resourceType {_name(Res, acl.resource_type)}"
    if acl.pattern not in (Pattern.LITERAL, Pattern.PREFIXED):
        return f"Invalid patternType {_name(Pattern, acl.pattern)}"
    if _unknown(Op, acl.operation) or acl.operation == Op.ANY:
        return f"Invalid operation {_name(Op, acl.operation)}"
    if acl.permission not in (Perm.DENY, Perm.ALLOW):
        return f"Invalid permissionType {_name(Perm, acl.permission)}"
    return None


def principal_problem(principal: str) -> str | None:
    """Kafka's SecurityUtils.parseKafkaPrincipal: TYPE:NAME."""
    if not principal or ":" not in principal:
        return f"expected a string in format principalType:principalName but got {principal}"
    return None


def _unknown(enum: type[IntEnum], value: int) -> bool:
    return _name(enum, value) == "UNKNOWN"


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return "UNKNOWN"


class Authorizer:
    """The bindings in force and the decisions they give. Decisions are cached until the
    bindings change (a produce checks its topics on every request)."""

    CACHE_LIMIT = 100_000

    def __init__(self, super_users: str = "", allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(u.strip() for u in super_users.split(";") if u.strip())
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: set[Acl] = set()
        self._by_type: dict[int, list[Acl]] = {}
        # where a decision looks: LITERAL bindings by (type, name), `*` ones and PREFIXED ones by type
        self._literal: dict[tuple[int, str], list[Acl]] = {}
        self._wildcard: dict[int, list[Acl]] = {}
        self._prefixed: dict[int, list[Acl]] = {}
        self._cache: dict[tuple, bool] = {}

    def replace(self, acls: set[Acl]) -> None:
        self.acls = set(acls)
        self._by_type, self._literal, self._wildcard, self._prefixed = {}, {}, {}, {}
        for acl in self.acls:
            self._by_type.setdefault(acl.resource_type, []).append(acl)
            if acl.pattern == Pattern.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)
            elif acl.name == WILDCARD:
                self._wildcard.setdefault(acl.resource_type, []).append(acl)
            else:
                self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
        self._cache.clear()

    def authorize(self, principal: str, host: str, op: int, resource_type: int, name: str) -> bool:
        key = (principal, host, op, resource_type, name)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._decide(principal, host, op, resource_type, name)
            if len(self._cache) >= self.CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = cached
        return cached

    def _decide(self, principal: str, host: str, op: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        on_resource = allowed = False
        applying = [*self._literal.get((resource_type, name), ()), *self._wildcard.get(resource_type, ()),
                    *(acl for acl in self._prefixed.get(resource_type, ()) if name.startswith(acl.name))]
        for acl in applying:
            on_resource = True
            verdict = acl.verdict(principals, host, op)
            if verdict == Perm.DENY:
                return False
            allowed = allowed or verdict == Perm.ALLOW
        return allowed or (not on_resource and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, op: int, resource_type: int) -> bool:
        """Kafka's authorizeByResourceType: may the principal do `op` on some resource of the
        type? Yes when an ALLOW pattern for it is not wholly covered by a DENY pattern."""
        if self.authorize(principal, host, op, resource_type, "hardcode"):  # super user, no-ACL default
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        denied_literals, denied_prefixes, allows = set(), [], []
        for acl in self._by_type.get(resource_type, ()):
            if acl.principal not in principals or (acl.host != WILDCARD and acl.host != host):
                continue
            if acl.operation not in (op, Op.ALL):
                continue
            if acl.permission == Perm.DENY:
                if acl.pattern == Pattern.LITERAL:
                    if acl.name == WILDCARD:
                        return False
                    denied_literals.add(acl.name)
                else:
                    denied_prefixes.append(acl.name)
            elif acl.permission == Perm.ALLOW:
                allows.append(acl)
        for acl in allows:
            if any(acl.name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if acl.pattern == Pattern.LITERAL and (acl.name in denied_literals):
                continue
            return True
        return False

    def operations(self, principal: str, host: str, resource_type: int, name: str) -> set[int]:
        """The authorized operations Kafka reports (kafka-python encodes the set as its bit field)."""
        return {int(op) for op in SUPPORTED_OPS.get(resource_type, ())
                if self.authorize(principal, host, op, resource_type, name)}

    def matching(self, flt: AclFilter) -> list[Acl]:
        return sorted((acl for acl in self.acls if flt.matches(acl)),
                      key=lambda a: (a.resource_type, a.name, a.pattern, a.principal, a.host, a.operation,
                                     a.permission))
