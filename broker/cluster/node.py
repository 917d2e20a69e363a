"""A node of a broker group: its role (master, follower, or waiting), coordinated through
ZooKeeper, and what the role means for the rest of the broker.

One task reads ZooKeeper whenever a watch fires (or every `STEP_S`), asks cluster_state.decide
what to do and does it: claim the master's place by compare-and-set, follow a master
(replication.follow), or keep leading and keep the sync-state set true. The master serves its
followers' streams (replication.serve_follower), tracks their progress in a SyncState, moves the
high watermark to what every member of the set holds (Store.replicated_to), and answers acks=all
produce requests once their bytes are there. Only the master writes: the group and transaction
coordinators and the producer-state snapshots run while it leads (Broker.run_master_services),
and a follower's store writes nothing of its own. Blocking ZooKeeper calls run in worker threads.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import trio
from kazoo.exceptions import KazooException
from prometheus_client.core import GaugeMetricFamily, Metric

from broker.cluster import inter_broker

from broker.cluster import sasl as node_sasl

from broker.cluster import tls as node_tls

from broker.net import peer

from broker.cluster import shipping as replication
from broker.security.acl import CLUSTER_NAME, Op, Res
from broker.security.sasl import stored_credentials
from broker.cluster.security import ClusterSecurity
from broker.cluster.state import (
    Claim,
    Follow,
    GroupRecord,
    Lead,
    SyncState,
    Wait,
    coordinator_group,
    decide,
    groups_with_master,
    truncation_point,
)
from broker.cluster.topics import ClusterTopics
from broker.security.dynamic_tls import REPLICATION, built_at_start, certificate
from broker.cluster.inter_broker import MarkersNotWritten
from broker.net.listeners import ssl_principal
from broker.cluster.access import NodeAccess
from broker.txn.state import OFFSETS_MARKER
from broker.cluster.zk import ZooKeeper
from broker.config import StartupError
from protocol.errors import ErrorCode
from store.topics import RESERVED_PREFIX

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.txn.coordinator import TxnCoordinator
    from broker.txn.producers import ProducerStateTable
    from store import TopicMeta

log = logging.getLogger("gregor.cluster")
HALTED_EXIT_STATUS = 1  # a node whose data directory failed exits with this (_halt_on_failed_disk)
STEP_S = 0.25  # ZooKeeper is read again at least this often (watches wake it sooner)


LISTED_AFTER_LEAVING_MS = 3000  # a node whose session ended stays in Metadata's broker list (live_brokers)
APPLIED_WAIT_S = 5.0  # a follower's admin change: how long it waits to hold it before answering (until_applied)
DRAIN_POLL_S = 0.01  # a clean stop's drain looks at the followers' reports this often (drain)


def _announce(message: str, *args: object) -> None:
    """A change of this node's role, on stderr whatever the log level (as `gregor ready` is): an
    operator reads there which node became master, and in which epoch."""
    print("gregor: " + message % args, file=sys.stderr, flush=True)


def now_ms() -> int:
    return math.ceil(trio.current_time() * 1000)


def address(info: dict) -> tuple[str, int]:
    """A node's address as its registration gives it for the listener of the connection being
    served (Kafka answers Metadata and FindCoordinator with the endpoints of the listener the
    request came in on: a SASL client is never sent to another node's PLAINTEXT port); its first
    listener outside a connection, or when it has none of that name."""
    lst = peer.listener.get()
    found = info.get("listeners", {}).get(lst.name) if lst is not None else None
    return (found[0], found[1]) if found else (info["host"], info["port"])


class Cluster:
    """A broker group's node as the rest of the broker sees it: broker/topology.py's Topology,
    answered for a group of several nodes through ZooKeeper."""

    def __init__(self, broker: Broker) -> None:
        config = broker.config
        self.broker = broker
        self.store = broker.store
        self.node_id: int = config["node.id"]
        self.group: str = config["broker.group"]
        self.lag_ms: int = config["replica.lag.time.max.ms"]
        self.tls: node_tls.NodeTls | None = None  # the replication port's TLS (None: plain TCP)
        self._use_tls(*built_at_start(node_tls.contexts, broker.tls_settings(REPLICATION), config.values,
                                      "the replication port"))
        self.sasl = node_sasl.login_settings(config)  # its SASL login (None: none)
        self.access = NodeAccess.from_config(config)  # the port's failed logins, its authenticated connections
        self.zk = ZooKeeper(config["zookeeper.connect"], self.group, config["zookeeper.session.timeout.ms"],
                            self._poke_from_thread)
        self.record: GroupRecord | None = None
        self.record_version = -1
        self.live: dict[int, dict] = {}  # live nodes' registrations (every group's)
        self._leaving: dict[int, tuple[dict, int]] = {}  # nodes whose session ended: (registration, when)
        self.members: list[int] = []  # the group's nodes
        self.groups: dict[str, tuple[GroupRecord | None, list[int]]] = {}  # every group: record, nodes
        self.topics = ClusterTopics(self)  # topics across broker groups, and where their partitions are
        self.security = ClusterSecurity(self)  # ACLs and SCRAM credentials across broker groups
        self.leading_epoch: int | None = None
        self.sync: SyncState | None = None
        self.hw_position = 0  # what every member of the sync-state set holds (master)
        self.draining = False  # a master stopped cleanly: it takes no more writes (drain)
        self._following: tuple[int, int] | None = None  # (master, epoch) followed
        self._lost: int | None = None  # the followed master, from its stream's end until a connection to it is made
        self._follow_scope: trio.CancelScope | None = None
        self._follow_done: trio.Event | None = None
        self._master_scope: trio.CancelScope | None = None
        self._master_done: trio.Event | None = None
        self._waiters: list[tuple[int, int, trio.Event]] = []  # acks=all answers by position
        self._ticket = itertools.count()
        self._changed = trio.Event()
        self._grew = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._session: int | None = None  # the ZooKeeper session this node's live znode belongs to
        self._info: dict = {}  # this node's registration (run)
        self.nursery: trio.Nursery | None = None  # the role task's (run)

    # ---- what handlers ask ----------------------------------------------------------------
    async def until_applied(self, done: Callable[[], bool]) -> bool:
        """A follower that put an admin change in ZooKeeper (ACLs, SCRAM credentials, topic
        configs: Kafka takes them at any broker) waits until its master has written it and this
        node holds it by replication, so a client reads here what it wrote here. False after
        APPLIED_WAIT_S (no master meanwhile): the change is in ZooKeeper all the same, and the
        group's next master writes it."""
        with trio.move_on_after(APPLIED_WAIT_S):
            while not done():
                await trio.sleep(0.01)
            return True
        log.warning("an admin change taken at follower %d is in ZooKeeper, not yet in its group's commitlog",
                    self.node_id)
        return False

    @property
    def leading(self) -> bool:
        return self.leading_epoch is not None

    @property
    def master(self) -> int:
        """The group's master as clients are told it (Metadata, FindCoordinator): -1 (Kafka's "no
        leader") while it has none live, and on a follower from the end of its stream from the
        master until a connection to it is made again (master_answers). A SIGKILLed master keeps
        its live znode until its ZooKeeper session ends. Named meanwhile, it ended librdkafka's
        fast leader query (started by the failed produce: every 100 ms, backing off to 1 s) at
        the first answer, leaving its once-a-second scan; "no leader" keeps both going
        (docs/replication.md, Metadata)."""
        rec = self.record
        if rec is None or rec.master not in self.live or rec.master == self._lost:
            return -1
        return rec.master

    @property
    def epoch(self) -> int:
        return self.record.epoch if self.record is not None else 0

    @property
    def sync_state_set(self) -> list[int]:
        if self.sync is not None:
            return sorted(self.sync.sync_state_set)
        return list(self.record.sync_state_set) if self.record is not None else []

    # ---- several broker groups ----------------------------------------------------------
    def group_names(self) -> list[str]:
        """The groups that have had a master, as the last step read them (coordinators)."""
        return groups_with_master(self.groups, self.group)

    def group_of(self, topic: str, partition: int) -> str | None:
        """The broker group a partition is placed on; None while this node does not know it yet. A
        follower's commitlog can bring a topic (or new partitions) before the follower's step has
        read the placement from ZooKeeper; saying "this group" then sent clients to the wrong
        master (CI: every partition of a topic spread over two groups reported as group a's).
        A master's unplaced topics are its own: it had them before joining a cluster and
        publishes them (ClusterTopics.sync)."""
        placement = self.topics.placements.get(topic)
        if placement is not None and 0 <= partition < len(placement):
            return placement[partition]
        return self.group if self.leading or topic.startswith(RESERVED_PREFIX) else None

    def leads(self, topic: str, partition: int) -> bool:
        """Does this node serve the partition's reads and writes (master of its group)?"""
        return self.leading_epoch is not None and self.group_of(topic, partition) == self.group

    def takes_writes(self, topic: str, partition: int) -> bool:
        """... and does it take writes to it now (not while a clean stop drains it)?"""
        return not self.draining and self.leads(topic, partition)

    def partition_view(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int], list[int]]:
        """(leader, leader epoch, replicas, ISR, offline replicas) of a partition, as Metadata
        reports it."""
        leader, epoch, replicas, isr = self._placed(topic, partition)
        return leader, epoch, replicas, isr, [n for n in replicas if n not in self.live]

    def _placed(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int]]:
        name = self.group_of(topic, partition)
        if name is None:  # placement not read yet: Kafka's "leader not available" of a topic being made
            return -1, 0, [], []
        if name == self.group:
            return self.master, self.epoch, self.members, self.sync_state_set
        record, members = self.groups.get(name, (None, []))
        if record is None:
            return -1, 0, members, []
        return (record.master if record.master in self.live else -1, record.epoch, members,
                list(record.sync_state_set))

    def replicas(self) -> int:
        """Every partition's replication factor: the group's size."""
        return max(len(self.members), 1)

    def coordinator(self, key: str) -> int:
        """The node coordinating a consumer group or transactional id: its broker group's master."""
        name = coordinator_group(key, self.group_names())
        if name == self.group:
            return self.master
        record = self.groups.get(name, (None, []))[0]
        return record.master if record is not None and record.master in self.live else -1

    def coordinates(self, key: str) -> bool:
        return self.leading and not self.draining and coordinator_group(key, self.group_names()) == self.group

    # ---- topic changes and security records: ZooKeeper first (broker/cluster/topics.py, security.py)
    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        return await self.topics.create_topic(name, partitions, configs)

    async def delete_topic(self, name: str) -> None:
        await self.topics.delete_topic(name)

    async def change_topic(self, name: str, partitions: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMeta:
        return await self.topics.change_topic(name, partitions=partitions, configs=configs)

    def auto_create(self, name: str, partitions: int) -> None:
        """Through ZooKeeper at any node, off the request: None, and the client asks again."""
        self.topics.create_soon(name, partitions)

    async def write_security(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """ZooKeeper takes ACL and credential records first, for every broker group; a master
        then writes them, a follower answers once it holds them by replication."""
        await self.security.publish(records)
        if not self.leading:
            await self.until_applied(lambda: all(self.store.state_value(k) == v for k, v in records))
            return
        await trio.to_thread.run_sync(self.store.write_state, records)

    def serve_master_state(self, producers: ProducerStateTable, txn: TxnCoordinator) -> None:
        """Producer ids come in blocks from ZooKeeper (any node answers InitProducerId); a
        transaction's markers for other groups' partitions go to their masters, and its own
        are shipped as soon as appended."""
        producers.reserve_block = self.zk.reserve_producer_ids
        txn.markers_elsewhere = self.write_markers_elsewhere
        txn.appended = self.appended

    @property
    def hands_over(self) -> bool:
        """A master's clean stop hands its group to the next master (drain first)."""
        return self.leading

    @property
    def replicates_over_tls(self) -> bool:
        return self.tls is not None

    def metrics(self) -> Iterator[Metric]:
        """Its role and, on the master, how far each follower is behind (docs/replication.md)."""
        yield GaugeMetricFamily("gregor_replication_master", "1 while this node is its broker group's master",
                                value=1 if self.leading else 0)
        yield GaugeMetricFamily("gregor_replication_sync_state_set_size",
                                "Nodes in the group's sync-state set (ISR)", value=len(self.sync_state_set))
        behind = GaugeMetricFamily("gregor_replication_follower_lag_bytes",
                                   "Master's commitlog end minus the position a follower last reported holding",
                                   labels=["node"])
        for node, bytes_behind in self.follower_lag().items():
            behind.add_metric([str(node)], bytes_behind)
        yield behind

    async def write_markers_elsewhere(self, markers: list[tuple[str, int]], consumer_groups: list[str],
                                      producer_id: int, producer_epoch: int, commit: bool) -> list[tuple[str, int]]:
        """The transaction coordinator's markers for partitions of other broker groups go to those
        groups' masters as WriteTxnMarkers (Kafka's coordinator does the same to each leader), and
        so does one for the transaction's offsets of consumer groups they coordinate
        (OFFSETS_MARKER); returns this group's own partitions."""
        here, elsewhere = [], {}
        for topic, partition in markers:
            name = self.group_of(topic, partition)
            if name == self.group:
                here.append((topic, partition))
            else:
                elsewhere.setdefault(name, []).append((topic, partition))
        names = self.group_names()
        for consumer_group in consumer_groups:
            name = coordinator_group(consumer_group, names)
            if name != self.group and OFFSETS_MARKER not in elsewhere.setdefault(name, []):
                elsewhere[name].append(OFFSETS_MARKER)
        for name, partitions in elsewhere.items():
            record = self.groups.get(name, (None, []))[0]
            endpoint = self.replication_endpoint(record.master) if record is not None else None
            if endpoint is None:
                raise MarkersNotWritten(f"broker group {name} has no master to write transaction markers")
            await inter_broker.write_txn_markers(self.connect_node, endpoint, partitions, producer_id, producer_epoch, commit)
        return here

    def replication_endpoint(self, node: int) -> tuple[str, int] | None:
        info = self.live.get(node)
        return None if info is None else (info["replication_host"], info["replication_port"])

    async def _serve_replication(self, stream: trio.SocketStream) -> None:
        """A connection to the replication port: a follower, or another group's transaction
        coordinator. With TLS or SASL between nodes, the authenticated principal's connection is
        closed once it loses ClusterAction (broker/cluster/access.py)."""
        try:
            host = stream.socket.getpeername()[0]
        except OSError:  # gone already
            await trio.aclose_forcefully(stream)
            return
        refused = self.access.refusal(host, trio.current_time() * 1000)
        if refused is not None:  # closed unanswered, as a listener does; logged once a window
            log.log(logging.WARNING if refused.first else logging.DEBUG, "refused a replication connection from %s: %s",
                    host, refused.reason)
            await trio.aclose_forcefully(stream)
            return
        principal = None
        if self.tls is not None:
            secure = await node_tls.accept(self.tls, stream, self._may_act_for_cluster, self._failed_login)
            if secure is None:
                return
            if self.tls.mutual:
                principal = f"User:{ssl_principal(secure.getpeercert())}"
            stream = secure
        if self.sasl is not None:
            principal = await node_sasl.accept(self.sasl, stream, host, stored_credentials(self.store),
                                               self._may_act_for_cluster, self._failed_login)
            if principal is None:
                await trio.aclose_forcefully(stream)
                return
        with trio.CancelScope() as scope:
            if principal is not None:
                self.access.opened(scope, principal, host)
            try:
                await replication.serve_follower(self, stream)
            finally:
                self.access.closed(scope)

    def reload_tls(self) -> None:
        """(Re)load the replication port's TLS (after listener.name.replication.ssl.* changed): new
        connections, both ways, use it; raises ListenerError when it cannot be built."""
        settings = self.broker.tls_settings(REPLICATION)
        self._use_tls(node_tls.contexts(settings), settings)

    def _use_tls(self, tls: node_tls.NodeTls | None, settings) -> None:
        self.tls = tls
        if tls is not None:
            self.broker.served_certificates[REPLICATION] = certificate(settings["ssl.keystore.location"])

    def _failed_login(self, host: str) -> None:
        self.access.record_failure(host, trio.current_time() * 1000)

    def _close_revoked_connections(self) -> None:
        """Close the replication connections whose principal lost ClusterAction since they logged in."""
        broker = self.broker
        if broker.authorizer is None or not self.access.open:
            return
        for scope, principal, host in self.access.revoked(self.store.acl_changes, self._may_act_for_cluster):
            log.warning("closing the replication connection of %s from %s: it is no longer allowed ClusterAction "
                        "on the cluster", principal, host)
            scope.cancel()

    def _may_act_for_cluster(self, principal: str, host: str) -> bool:
        """Kafka's ClusterAction on the cluster, asked of another node's certificate principal."""
        broker = self.broker
        return broker.authorizer is None or broker.current_acls().authorize(
            principal, host, Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)

    async def connect_node(self, host: str, port: int) -> trio.abc.Stream:
        """A connection to another node's replication port: TLS with SSL and SASL_SSL between nodes,
        then this node's SASL login with SASL_*; raises trio.BrokenResourceError when either fails."""
        stream = await node_tls.connect(self.tls, host, port)
        if self.sasl is not None:
            try:
                await node_sasl.login(self.sasl, stream, f"{host}:{port}")
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
        return stream

    async def serve_markers(self, stream: trio.abc.Stream, version: int) -> None:
        """Another group's transaction coordinator, on this node's replication port."""
        await inter_broker.serve_markers(self.broker, stream, version)

    def endpoint(self, node: int) -> tuple[str, int] | None:
        info = self.live.get(node)
        return None if info is None else address(info)

    def live_brokers(self) -> list[tuple[int, str, int]]:
        """Metadata's broker list: the live nodes, and for LISTED_AFTER_LEAVING_MS the ones whose
        session just ended. librdkafka (2.10 and later) decommissions a broker that leaves the
        list; when that comes in the same Metadata answer as the new master of the broker's
        group, the partitions it moves to the new master fall back to "no leader" for its next
        once-a-second lookup (seen in its debug log: "Reverting ... to leader -1"). Listed a
        moment longer, the node leaves the list after the partitions moved. Leaders, the
        sync-state set and offline replicas count live nodes only."""
        listed = {node: info for node, (info, _) in self._leaving.items()} | self.live
        return sorted((node, *address(info), info.get("rack")) for node, info in listed.items())

    def broker_groups(self) -> list[dict[str, Any]]:
        """Every broker group as the web console's overview shows it: its nodes, which of them are
        live, its master (-1: none live) and epoch, its sync-state set; and, on its master, how
        many commitlog bytes each follower is behind (only the master knows)."""
        out = []
        for name, (record, nodes) in sorted(self.groups.items()):
            own = name == self.group
            if own:
                master, sync_state = self.master, self.sync_state_set
            else:
                master = record.master if record is not None and record.master in self.live else -1
                sync_state = list(record.sync_state_set) if record is not None else []
            behind = self.follower_lag() if own and self.leading else {}
            out.append({"name": name, "master": master, "epoch": record.epoch if record is not None else 0,
                        "nodes": sorted(nodes), "live": sorted(n for n in nodes if n in self.live),
                        "sync_state": sync_state, "leaderless": master < 0,
                        "followers": [{"id": n, "lag_bytes": b} for n, b in sorted(behind.items())]})
        return out

    # ---- follower fetching (KIP-392) ------------------------------------------------------
    def preferred_read_replica(self, rack: str) -> int:
        """The node a consumer in `rack` should read this master's partitions from, as Kafka's
        RackAwareReplicaSelector picks it: the master if it is in that rack or no member of the
        sync-state set is, else the member there that holds the most; -1 for the master."""
        sync = self.sync
        if not rack or sync is None or self._info.get("rack") == rack:
            return -1
        there = [n for n in sync.sync_state_set if n != self.node_id and (self.live.get(n) or {}).get("rack") == rack]
        if not there:
            return -1
        return max(there, key=lambda n: (sync.followers[n].position if n in sync.followers else 0, -n))

    def serves_reads(self, topic: str, partition: int) -> bool:
        """Does this node answer a consumer's Fetch of the partition as a replica: it is a
        follower in the partition's group whose store follows (high watermarks from its master)
        and is derived (not a copy being made)? Kafka's followers serve Fetch v11 and later
        (KIP-392), up to their high watermark."""
        return (self.leading_epoch is None and self.group_of(topic, partition) == self.group
                and self.store.following and self.store.starting_over is None)

    def appended(self) -> None:
        """The master appended: wake followers waiting for bytes; alone in the set, the high
        watermark moves at once."""
        self._wake_followers()
        self._advance()

    def holds(self, position: int) -> bool:
        """Does every member of the sync-state set hold the commitlog below `position`? (Alone in
        the set, the master does as soon as it appended.)"""
        return self.hw_position >= position

    def _wake_followers(self) -> None:
        """Answer the followers' streams waiting for appends (a new Event for the next wait)."""
        self._grew.set()
        self._grew = trio.Event()

    async def await_replicated(self, position: int, epoch: int, timeout_s: float) -> int:
        """acks=all: NONE once every member of the sync-state set holds the commitlog below
        `position`; NOT_LEADER_OR_FOLLOWER if this node stopped leading meanwhile;
        REQUEST_TIMED_OUT after `timeout_s`."""
        if self.hw_position < position:
            event = trio.Event()
            heapq.heappush(self._waiters, (position, next(self._ticket), event))
            with trio.move_on_after(timeout_s):
                await event.wait()
        if self.leading_epoch != epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.hw_position < position:
            return ErrorCode.REQUEST_TIMED_OUT
        return ErrorCode.NONE

    async def drain(self) -> None:
        """A clean stop of the master (SIGTERM; controlled.shutdown.enable): from now on it
        refuses writes (produce NOT_LEADER_OR_FOLLOWER, group and transaction requests
        NOT_COORDINATOR, topic changes NOT_CONTROLLER: clients retry, and find the next master
        once this one's ZooKeeper session is closed), and it waits until every member of the
        sync-state set with an open stream holds its commitlog's end, so that the member elected
        next has every record it wrote, acks=1 ones included; at most replica.lag.time.max.ms (a
        member that does not catch up within it would leave the set anyway). Kafka's controlled
        shutdown moves leadership without waiting: acks=1 records its followers had not fetched
        are lost."""
        epoch = self.leading_epoch
        if epoch is None or not self.broker.config["controlled.shutdown.enable"]:
            return
        self.draining = True
        started = trio.current_time()
        timeout_s = self.broker.config["replica.lag.time.max.ms"] / 1000
        with trio.move_on_after(timeout_s):
            # the log's end read each time: a request taken before the stop may still append
            while self.leading_epoch == epoch and not self._drained(self.store.log_end_position):
                await trio.sleep(DRAIN_POLL_S)
        end = self.store.log_end_position
        if self.leading_epoch != epoch:
            log.warning("node %d stopped leading while draining for a clean stop", self.node_id)
        elif not self._drained(end):
            log.warning("clean stop: the sync-state set %s does not hold this master's commitlog end %d after %g s; "
                        "handing over without it", self.sync_state_set, end, timeout_s)
        else:
            log.info("clean stop: the sync-state set %s holds this master's commitlog end %d (drained in %.3f s); "
                     "handing over", self.sync_state_set, end, trio.current_time() - started)

    def _drained(self, end: int) -> bool:
        return self.sync is None or self.sync.drained(end)

    def follower_lag(self) -> dict[int, int]:
        """On the master: each follower's distance, in commitlog bytes, from the log end."""
        if self.sync is None:
            return {}
        end = self.store.log_end_position
        return {node: max(end - p.position, 0) for node, p in self.sync.followers.items()}

    def in_sync(self) -> int:
        return len(self.sync.sync_state_set) if self.sync is not None else 0

    # ---- what the replication streams report ----------------------------------------------
    def truncation_point(self, follower_epoch: int, follower_end: int) -> int:
        return truncation_point(self.store.master_epochs(), self.store.log_end_position, follower_epoch,
                                follower_end)

    def fetched(self, node: int, position: int) -> None:
        if self.sync is None:
            return
        self.sync.fetched(node, position, self.store.log_end_position, now_ms())
        self._advance()
        if node not in self.sync.sync_state_set and position >= self.hw_position:
            self._changed.set()  # it may join the set

    def disconnected(self, node: int) -> None:
        if self.sync is not None:
            self.sync.disconnected(node)
            self._changed.set()  # a member gone from ZooKeeper too leaves the set at once (wanted_set)

    def master_answers(self, node: int, answers: bool) -> None:
        """replication.follow: a connection to master `node` was made (True), or its stream was
        closed or reset by the master's end, or its replication port refused a connection
        (False: its process is gone, or it stopped leading). Timeouts do not count: a master out
        of reach over the network may still serve clients."""
        if not answers and self._lost != node:
            log.warning("master %d closed or refused replication: node %d reports the group's partitions "
                        "without a leader until it answers again or another master is elected", node, self.node_id)
        elif answers and self._lost == node:
            log.info("master %d answers replication connections again", node)
        self._lost = None if answers else node

    async def wait_for_appends(self, position: int, timeout_s: float) -> None:
        if self.store.log_end_position > position:
            return
        with trio.move_on_after(timeout_s):
            await self._grew.wait()

    def _advance(self) -> None:
        """Move the high watermark to what the sync-state set holds, and answer acks=all
        produce requests it covers. Not while ZooKeeper is unreachable: a master cut off from
        it may have been replaced, and acknowledges nothing until it knows."""
        if self.sync is None or not self.zk.connected:
            return
        hw = self.sync.hw_position(self.store.log_end_position)
        if hw <= self.hw_position:
            return
        self.hw_position = hw
        self.store.replicated_to(hw)
        waiters = self._waiters
        while waiters and waiters[0][0] <= hw:
            heapq.heappop(waiters)[2].set()

    def _release_waiters(self) -> None:
        for _, _, event in self._waiters:
            event.set()
        self._waiters.clear()

    # ---- the role task ---------------------------------------------------------------------
    def _poke_from_thread(self) -> None:
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._changed.set)
            except trio.RunFinishedError:
                pass

    async def run(self, replication_listeners: list[trio.SocketListener], info: dict,
                  task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Join the group and play this node's part until cancelled."""
        self._token = trio.lowlevel.current_trio_token()
        timeout_s = self.broker.config["zookeeper.connection.timeout.ms"] / 1000
        try:
            await trio.to_thread.run_sync(self.zk.start, timeout_s)
        except Exception as exc:  # noqa: BLE001 - kazoo's timeout and connection errors: one line and stop
            raise StartupError(f"cannot reach ZooKeeper at {self.broker.config['zookeeper.connect']}: "
                             f"{exc or type(exc).__name__}") from None
        self.broker.cluster_id = await trio.to_thread.run_sync(self.zk.cluster_id)
        self.store.replicate(following=True)  # nothing of its own until it knows its role
        self._info = info
        await self._register()
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                nursery.start_soon(trio.serve_listeners, self._serve_replication, replication_listeners)
                await self._step()
                task_status.started()
                while True:
                    with trio.move_on_after(STEP_S):
                        await self._changed.wait()
                    self._changed = trio.Event()
                    self._close_revoked_connections()
                    if self.store.offline is not None:
                        await self._halt_on_failed_disk()
                    try:
                        await self._step()
                    except KazooException as exc:  # ZooKeeper went away mid-step: the next step reads it again
                        log.warning("reading ZooKeeper failed, trying again: %r", exc)
        finally:
            self._release_waiters()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.zk.stop)

    async def _halt_on_failed_disk(self) -> None:
        """A failed commitlog write or fsync took the data directory offline: this node can
        neither append as master nor apply as follower until the disk is fixed, so it leaves the
        cluster as Kafka halts a broker whose last log directory failed. Its ZooKeeper session
        is closed first, so the group elects another master from its sync-state set at once
        rather than after the session timeout. The process ends without its shutdown path
        (os._exit, Kafka's Exit.halt): nothing more is written to the failed disk; what the
        mappings hold reaches it as after a SIGKILL, and recovery checks it on the next start."""
        log.error("node %d leaves the cluster and exits: %s; restart it once the disk is fixed (it truncates "
                  "what its group's master never had and catches up, as any returning node)",
                  self.node_id, self.store.offline)
        with trio.CancelScope(shield=True):
            with trio.move_on_after(10):
                await trio.to_thread.run_sync(self.zk.stop, abandon_on_cancel=True)
        logging.shutdown()  # the line above is on stderr before the process ends
        os._exit(HALTED_EXIT_STATUS)

    async def _register(self) -> None:
        await trio.to_thread.run_sync(self.zk.register, self.node_id, self._info)
        self._session = self.zk.client.client_id[0] if self.zk.client.client_id else None

    async def _step(self) -> None:
        if not self.zk.connected:
            if self.leading and self.zk.state == "LOST":
                log.warning("ZooKeeper session lost: node %d stops leading epoch %d", self.node_id, self.leading_epoch)
                await self._stop_leading()
            return
        client_id = self.zk.client.client_id
        if client_id is None or client_id[0] != self._session:  # a new session: the live znode is gone
            await self._register()
        live = await trio.to_thread.run_sync(self.zk.nodes)
        snap = await trio.to_thread.run_sync(self.zk.snapshot, live)
        self.groups = await trio.to_thread.run_sync(self.zk.groups)
        self.members = self.groups.get(self.group, (None, []))[1]
        now = now_ms()  # nodes that left stay listed (live_brokers) until a step after LISTED_AFTER_LEAVING_MS
        self._leaving.update({node: (info, now) for node, info in self.live.items() if node not in live})
        self._leaving = {node: left for node, left in self._leaving.items()
                         if node not in live and now - left[1] < LISTED_AFTER_LEAVING_MS}
        self.live = live
        self.record, self.record_version = snap.record, snap.version
        action = decide(self.node_id, snap, self.leading_epoch)
        if isinstance(action, Claim):
            if self.leading:  # a newer epoch of its own (it lost its session meanwhile): start over
                await self._stop_leading()
            if await trio.to_thread.run_sync(self.zk.write, action.record, action.version):
                self.record, self.record_version = action.record, action.version + 1
                await self._lead(action.record)
            self._changed.set()  # read ZooKeeper again at once
        elif isinstance(action, Lead):
            await self._keep_sync_state_set(snap.record, snap.version)
        elif isinstance(action, Follow):
            if self.leading:
                await self._stop_leading()
            await self._follow(action.master, action.epoch)
        elif isinstance(action, Wait):
            if self.leading:
                await self._stop_leading()
            await self._stop_following()
            log.debug("%s", action.reason)
        await self.topics.sync()
        await self.security.sync()

    async def _keep_sync_state_set(self, record: GroupRecord, version: int) -> None:
        """Write the sync-state set the followers' progress calls for; a smaller set is in force
        only once ZooKeeper has it, so no node that might be elected misses an acknowledged byte."""
        assert self.sync is not None
        wanted = self.sync.wanted_set(self.store.log_end_position, now_ms(), self.live)
        if wanted == frozenset(record.sync_state_set):
            self.sync.sync_state_set = wanted
            return
        if await trio.to_thread.run_sync(self.zk.write, record.with_set(wanted), version):
            log.info("sync-state set of group %s: %s -> %s", self.group, sorted(record.sync_state_set), sorted(wanted))
            self.sync.sync_state_set = wanted
            self.record = record.with_set(wanted)
            self._advance()
        self._changed.set()

    async def _lead(self, record: GroupRecord) -> None:
        await self._stop_following()
        self.store.replicate(following=False)
        start = await trio.to_thread.run_sync(self.store.begin_master_epoch, record.epoch)
        self.hw_position = 0
        self.sync = SyncState(self.node_id, frozenset(record.sync_state_set), self.lag_ms, now_ms())
        self._master_done = trio.Event()
        self._master_scope = await self.nursery.start(self._run_master, self._master_done)
        self.leading_epoch = record.epoch
        self.topics.version = -1  # a new master makes its commitlog's topics match ZooKeeper's
        self.security.version = -1  # and its ACLs and credentials
        self._advance()
        _announce("node %d is master of group %s in epoch %d (commitlog from %d; sync-state set %s)",
                  self.node_id, self.group, record.epoch, start, sorted(record.sync_state_set))
        self._wake_followers()

    async def _run_master(self, done: trio.Event, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            with trio.CancelScope() as scope:
                await self.broker.become_master()
                task_status.started(scope)
                await self.broker.run_master_services()
        finally:
            done.set()

    async def _stop_leading(self) -> None:
        _announce("node %d stops leading group %s (epoch %s)", self.node_id, self.group, self.leading_epoch)
        self.leading_epoch = None
        self.sync = None
        if self._master_scope is not None:
            self._master_scope.cancel()
            await self._master_done.wait()
            self._master_scope = None
        self.store.replicate(following=True)
        self._release_waiters()
        self._wake_followers()

    async def _follow(self, master: int, epoch: int) -> None:
        if self._following == (master, epoch):
            return
        endpoint = self.live.get(master)
        if endpoint is None:
            return
        await self._stop_following()
        self.store.replicate(following=True)
        self._following = (master, epoch)
        self._follow_done = trio.Event()
        _announce("node %d follows master %d of group %s in epoch %d", self.node_id, master, self.group, epoch)
        self._follow_scope = await self.nursery.start(
            self._run_follower, master, endpoint["replication_host"], endpoint["replication_port"], epoch,
            self._follow_done)

    async def _run_follower(self, master: int, host: str, port: int, epoch: int, done: trio.Event,
                            task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                await replication.follow(self, master, host, port, epoch)
        finally:
            done.set()

    async def _stop_following(self) -> None:
        """Stop following and wait until the stream's last apply is done (it runs in a thread)."""
        if self._follow_scope is not None:
            self._follow_scope.cancel()
            await self._follow_done.wait()
            self._follow_scope = None
        self._following = None
        self._lost = None
