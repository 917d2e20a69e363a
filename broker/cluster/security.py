"""ACLs and SCRAM credentials across the broker groups of a cluster (docs/replication.md,
*Several broker groups*), and the dynamic broker settings, each node's and the cluster-wide defaults
(broker/broker_settings.py), kept the same way: each binding, credential and setting is a znode under /security (named by its state
key in hex, holding its state value), and every group's master makes its commitlog's match them
when /security_changed moves; its followers get them by replication.
Kafka in ZooKeeper mode keeps both in ZooKeeper the same way (/kafka-acl, /config/users), so a
user created through any broker authenticates at every broker.

A change (CreateAcls, DeleteAcls, AlterUserScramCredentials) goes to ZooKeeper first, then at a
master into this group's commitlog; at a follower its master writes it on the watch, and the
follower answers once it holds it (Broker.write_security). A group's master that has never synchronised (a
single broker that joined a cluster, or the cluster's first group) first publishes the bindings
and credentials only it has, then marks its group in /security_groups; after that ZooKeeper's
set is the group's. Blocking calls (ZooKeeper, the state write) run in worker threads.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio
from kazoo.exceptions import KazooException

from broker.cluster.zk import ZooKeeper
from store import Store, StoreError
from store.state import ACL, BROKER_CONFIG, CREDENTIAL, GROUP_CONFIG


class Node(Protocol):
    """What the security records across groups need of this node (broker/cluster/node.py's Cluster)."""

    store: Store
    zk: ZooKeeper
    group: str

    @property
    def leading(self) -> bool: ...

log = logging.getLogger("gregor.cluster")
SHARED = (ACL, CREDENTIAL, BROKER_CONFIG, GROUP_CONFIG)  # state key prefixes every group holds alike


class NotPublished(StoreError):
    """ZooKeeper did not take a security change: nothing was written (the client may retry)."""


class ClusterSecurity:
    def __init__(self, cluster: Node) -> None:
        self.cluster = cluster
        self.version = -1  # of /security_changed when this master last synchronised (-1: do it)

    async def publish(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Put ACL or credential changes in ZooKeeper (before the caller writes its commitlog)."""
        try:
            await trio.to_thread.run_sync(self.cluster.zk.set_security, records)
        except KazooException as exc:
            raise NotPublished(f"ZooKeeper did not take the change: {exc!r}") from exc

    async def sync(self) -> None:
        """A master makes its commitlog's ACLs and credentials match ZooKeeper's when they changed."""
        if not self.cluster.leading:
            return
        zk, store, run = self.cluster.zk, self.cluster.store, trio.to_thread.run_sync
        version = await run(zk.security_version)
        if version == self.version:
            return
        shared = await run(zk.security)
        have = {key: value for prefix in SHARED for key, value in store.state_items(prefix)}
        if not await run(zk.security_joined, self.cluster.group):
            own = [(key, value) for key, value in have.items() if key not in shared]
            if own:
                log.info("publishing %d ACL binding(s) and credential(s) of group %s to the cluster", len(own),
                         self.cluster.group)
                await run(zk.set_security, own)
                shared.update(own)
            await run(zk.join_security, self.cluster.group)
        changes = [(key, value) for key, value in shared.items() if have.get(key) != value]
        changes += [(key, None) for key in have if key not in shared]
        if changes:
            try:
                await run(store.write_state, changes)
            except StoreError as exc:  # a full disk: the next change of /security_changed retries
                log.warning("ACLs and credentials not made as ZooKeeper has them: %s", exc)
                return
            log.info("group %s took %d ACL or credential change(s) from the cluster", self.cluster.group,
                     len(changes))
        self.version = version
