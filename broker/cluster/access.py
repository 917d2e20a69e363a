"""Who may keep using the replication port (the commitlog's shipping, other groups' transaction
markers) once a node has authenticated to it (broker/cluster/tls.py, broker/cluster/sasl.py).

- **Repeated failed logins.** A wrong SCRAM or PLAIN password, or a refused node certificate,
  counts towards failed.authentication.limit within failed.authentication.window.ms, as at a
  listener (broker/security/auth_limit.py), and once an address reaches it, its new connections to the
  port are closed as they are accepted until the oldest failure leaves the window. The port
  keeps its own count: a client failing at a listener from a node's address does not cut that
  node off from replication, nor a node's failures the clients of its host.
- **ClusterAction is checked again whenever the ACLs change.** Kafka authorizes every
  replica fetch and WriteTxnMarkers request, so a deleted ACL stops the next one
  (CLUSTER_AUTHORIZATION_FAILED). A follower's stream is one long exchange, not requests, so
  the connections whose principal has lost ClusterAction are closed instead; the node's next
  login is refused, and it retries every second until it is allowed again.

No I/O here: the cluster task cancels the scopes `revoked` returns, and passes the time in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from broker.security.auth_limit import FailedAuthentications, Refusal


@dataclass
class NodeAccess:
    failed: FailedAuthentications
    open: dict[trio.CancelScope, tuple[str, str]] = field(default_factory=dict)  # connection -> (principal, host)
    acls_checked: int = -1  # the store's ACL change count when the open connections were last checked

    @classmethod
    def from_config(cls, config) -> NodeAccess:
        return cls(FailedAuthentications(config["failed.authentication.limit"],
                                         config["failed.authentication.window.ms"]))

    def refusal(self, host: str, now_ms: float) -> Refusal | None:
        """Why a new connection from `host` is closed as it is accepted, or None."""
        return self.failed.refusal(host, now_ms)

    def record_failure(self, host: str, now_ms: float) -> None:
        self.failed.record(host, now_ms)

    def opened(self, scope: trio.CancelScope, principal: str, host: str) -> None:
        self.open[scope] = (principal, host)

    def closed(self, scope: trio.CancelScope) -> None:
        self.open.pop(scope, None)

    def revoked(self, acl_changes: int, allowed: Callable[[str, str], bool]
                ) -> list[tuple[trio.CancelScope, str, str]]:
        """The open connections whose principal `allowed(principal, host)` now refuses, once
        per change of the ACLs (`acl_changes`, the store's count); they are forgotten here."""
        if acl_changes == self.acls_checked:
            return []
        self.acls_checked = acl_changes
        gone = [(scope, principal, host) for scope, (principal, host) in self.open.items()
                if not allowed(principal, host)]
        for scope, _, _ in gone:
            del self.open[scope]
        return gone
