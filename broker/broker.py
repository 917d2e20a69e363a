"""The running broker's shared state: config, store, fetch wake-ups,
producer-id state, and topic naming rules. Handlers receive this object.

Owns nothing network-related; the store is reached only through its API.
"""

from __future__ import annotations

import logging
import re
import ssl
import uuid
from dataclasses import dataclass, field
from functools import partial

import trio

from broker.security import dynamic_tls

from broker.net import peer
from broker.security.acl import ACL_PREFIX, Acl, Authorizer, Op, Res
from broker.security.auth_limit import FailedLogins
from broker.broker_settings import BrokerSettings
from broker.config import BrokerConfig
from broker.fetch_sessions import FetchSessionCache
from broker.groups.coordinator import GroupCoordinator
from broker.groups.dead_letters import DeadLetters
from broker.groups.share_coordinator import ShareCoordinator, ShareSettings
from broker.net.connection_limits import ConnectionCounts
from broker.net.listeners import Listener, tls_context
from broker.net.metrics import BrokerMetrics
from broker.txn.producers import ProducerStateTable, restore, snapshot_payload, write_snapshot
from broker.txn.coordinator import TxnCoordinator
from broker.topology import SingleNode, Topology
from protocol.errors import ErrorCode
from store import Store, StoreError, TopicMeta
from store.topics import RESERVED_PREFIX

log = logging.getLogger(__name__)
audit = logging.getLogger("gregor.authorizer")  # denials, as Kafka's kafka.authorizer.logger

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


def topic_name_error(name: str | None) -> str | None:
    """Kafka's Topic.validate rules; None when the name is legal."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_TOPIC_LENGTH:
        return (f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
                f"{MAX_TOPIC_LENGTH}")
    if name.startswith(RESERVED_PREFIX):
        return f"Topic name is invalid: names starting with '{RESERVED_PREFIX}' are reserved for Gregor's internal topics"
    if not LEGAL_TOPIC.match(name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than ASCII "
                "alphanumerics, '.', '_' and '-'")
    return None


@dataclass
class AppendSignals:
    """Wakes long-polling fetches: one trio.Event per waiting fetch, per partition."""

    waiters: dict[tuple[str, int], set[trio.Event]] = field(default_factory=dict)

    def notify(self, keys: list[tuple[str, int]]) -> None:
        """The partitions `keys` (topic, partition) have more to read (Store.subscribe_appends)."""
        waiters = self.waiters
        if not waiters:  # no fetch waits: a produce of 100 partitions pays one test, not 100 lookups
            return
        for key in keys:
            events = waiters.pop(key, None)
            if events:
                for event in events:
                    event.set()

    def register(self, keys: list[tuple[str, int]], event: trio.Event) -> None:
        for key in keys:
            self.waiters.setdefault(key, set()).add(event)

    def unregister(self, keys: list[tuple[str, int]], event: trio.Event) -> None:
        for key in keys:
            events = self.waiters.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self.waiters[key]


class Broker:
    def __init__(self, config: BrokerConfig, store: Store, cluster_id: str) -> None:
        self.config = config
        self.store = store
        self.cluster_id = cluster_id
        self.node_id: int = config["node.id"]
        self.port: int = config.port  # replaced by the bound port once listening
        self.admin_address: str | None = None  # "host:port" of the admin HTTP API once it listens
        self.listeners: list[Listener] = config.listeners()  # ports replaced by the bound ones
        self.appends = AppendSignals()
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.connections = ConnectionCounts(config["max.connections"], config["max.connections.per.ip"])
        self.failed_logins = FailedLogins(config["connection.failed.authentication.delay.ms"],
                                          config["failed.authentication.limit"], config["failed.authentication.window.ms"])
        self.producers = ProducerStateTable(store)
        self.coordinator = GroupCoordinator.from_config(config, store.offsets, store)
        self.share = self._share_coordinator()
        self.txn = TxnCoordinator(store, self.producers, config["transaction.max.timeout.ms"],
                                  config["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        store.subscribe_appends(self.appends.notify)
        # who leads, who is in sync, who coordinates: this node alone, or its broker group's node
        # (broker/cluster/node.py), which the server sets when zookeeper.connect is
        self.topology: Topology = SingleNode(store, self.node_id, config["broker.rack"] or None, log.warning)
        self.metrics = BrokerMetrics()  # its state's gauges are added by the admin API (broker/net/state_metrics.py)
        self.settings = BrokerSettings(config, store, self.node_id)  # dynamic over static, TLS files too
        self.refresh_dynamic()
        self.listener_tls: dict[str, ssl.SSLContext] = {}  # TLS listener name -> its context (load_listener_tls)
        self.served_certificates: dict[str, dict] = {}  # lower-case listener name -> the certificate it serves
        self.authorizer: Authorizer | None = None
        self._acls_seen = -1  # store.acl_changes when the authorizer last read the ACLs
        if config["authorizer.class.name"]:
            self.authorizer = Authorizer(config["super.users"], config["allow.everyone.if.no.acl.found"])
            self.reload_acls()

    # ---- dynamic settings (broker/broker_settings.py) ---------------------------------------------
    @property
    def dynamic_settings(self) -> dict[str, str]:
        """This broker's own dynamic settings (listener.name.<l>.ssl.* among them)."""
        return self.settings.per_broker

    def refresh_dynamic(self) -> None:
        """Put dynamic settings in force if any changed (here, or by replication)."""
        if self.settings.reload():
            self.settings.apply(self.connections)

    async def follow_dynamic_settings(self) -> None:
        """Changes another node made arrive by replication: looked for every second."""
        while True:
            await trio.sleep(1)
            self.refresh_dynamic()

    # ---- TLS settings, static and dynamic (broker/security/dynamic_tls.py) ----------------------------
    def tls_settings(self, listener: str) -> dict:
        """The settings `listener` (or dynamic_tls.REPLICATION) takes its TLS files from."""
        return dynamic_tls.effective(self.config.values, self.dynamic_settings, listener)

    def load_listener_tls(self, only: str | None = None) -> None:
        """(Re)build the server contexts of the TLS listeners (or of the one named `only`): new
        connections take the new one; raises ListenerError with one line when it cannot be built.
        At start (`only` None), a listener whose dynamic settings no longer load starts on its
        static ones (dynamic_tls.built_at_start)."""
        for lst in self.listeners:
            if lst.tls and (only is None or lst.name.lower() == only):
                build = partial(tls_context, sasl=lst.sasl)
                settings = self.tls_settings(lst.name)
                if only is None:
                    context, settings = dynamic_tls.built_at_start(build, settings, self.config.values,
                                                                   f"listener {lst.name}")
                else:
                    context = build(settings)
                self.listener_tls[lst.name] = context
                self.served_certificates[lst.name.lower()] = dynamic_tls.certificate(settings["ssl.keystore.location"])

    def tls_listener_names(self) -> set[str]:
        """Lower-case names whose TLS may change at runtime: the TLS listeners, and the replication
        port when it speaks TLS."""
        names = {lst.name.lower() for lst in self.listeners if lst.tls}
        if self.topology.replicates_over_tls:
            names.add(dynamic_tls.REPLICATION)
        return names

    def apply_tls(self, listener: str) -> None:
        """Put `listener`'s current settings in force (after a dynamic change)."""
        if listener == dynamic_tls.REPLICATION:
            self.topology.reload_tls()
        else:
            self.load_listener_tls(only=listener)
        log.info("TLS of %s reloaded: new connections get the certificate of %s", listener,
                 self.tls_settings(listener)["ssl.keystore.location"])

    async def become_master(self) -> None:
        """This node starts leading its group: the producer, group and transaction state are
        read again from the commitlog its master shipped (Kafka's coordinators load their
        partitions when they become leader)."""
        producers = ProducerStateTable(self.store)
        await trio.to_thread.run_sync(restore, producers, self.store)
        self.producers = producers
        self.coordinator = GroupCoordinator.from_config(self.config, self.store.offsets, self.store)
        self.share = self._share_coordinator()
        self.txn = TxnCoordinator(self.store, producers, self.config["transaction.max.timeout.ms"],
                                  self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        self.topology.serve_master_state(producers, self.txn)
        self.reload_acls()

    def _share_coordinator(self) -> ShareCoordinator:
        share = ShareCoordinator(ShareSettings.from_config(self.config), groups=self.coordinator, state=self.store)
        self.coordinator.is_share_group = share.has_group
        self.coordinator.group_config = share.group_config
        share.write_configs = lambda records: self.topology.write_security(records)  # in a cluster: every group
        share.offset_for_time = lambda topic, partition, ts: self.store.offset_for_timestamp(topic, partition, ts)[0]
        share.dead_letters = DeadLetters(self.store, lambda: self.topology,
                                         self.config["errors.deadletterqueue.auto.create.topics.enable"],
                                         self.config["errors.deadletterqueue.topic.name.prefix"])
        return share

    def subscribable_topics(self) -> dict[str, int]:
        """Every topic a consumer-protocol or share group may subscribe to (internal ones never), by
        partition count."""
        return {name: meta.partitions for name, meta in self.store.topics().items() if not name.startswith("__")}

    def topic_names_by_id(self) -> dict[uuid.UUID, str]:
        """The same topics' names by topic id (KIP-848's and KIP-932's requests name topics by id)."""
        return {meta.topic_id: name for name, meta in self.store.topics().items() if not name.startswith("__")}

    def share_offsets(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(log start, high watermark) of a partition this node leads, for share-partitions."""
        meta = self.store.topics().get(topic)
        if meta is None or not 0 <= partition < meta.partitions or not self.topology.leads(topic, partition):
            return None
        return self.store.log_start_offset(topic, partition), self.store.high_watermark(topic, partition)

    async def run_master_services(self) -> None:
        """What only the node that writes the commitlog runs: the coordinators' timers and the
        producer-state snapshots (always on a single node; while leading in a broker group)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.coordinator.run)
            nursery.start_soon(self.share.run, self.subscribable_topics)
            nursery.start_soon(self.txn.run)
            nursery.start_soon(self._snapshot_producers_periodically)

    async def snapshot_producers(self) -> None:
        if self.store.following:  # a follower's commitlog holds only what its master wrote
            return
        payload = snapshot_payload(self.producers, self.end_offsets())  # on the loop: a consistent view
        try:
            await trio.to_thread.run_sync(write_snapshot, self.store, payload)
        except StoreError as exc:  # full disk, offline log dir: the next start replays more batches instead
            log.warning("producer-state snapshot not written: %s", exc)

    async def _snapshot_producers_periodically(self) -> None:
        while True:
            await trio.sleep(self.config["producer.state.snapshot.interval.ms"] / 1000)
            await self.snapshot_producers()

    async def replicated(self) -> int:
        """Wait until the sync-state set holds everything this master has written so far (a state
        change it is about to acknowledge: committed offsets, a transaction's end): what acks=all
        would answer (NONE at once for a cluster of one)."""
        topology = self.topology
        epoch = topology.leading_epoch
        if epoch is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        topology.appended()
        return await topology.await_replicated(self.store.log_end_position, epoch,
                                               self.config["request.timeout.ms"] / 1000)

    # ---- topic changes and security records: the topology's (the store, or ZooKeeper first) ----
    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        return await self.topology.create_topic(name, partitions, configs)

    async def delete_topic(self, name: str) -> None:
        await self.topology.delete_topic(name)

    async def add_partitions(self, name: str, total: int) -> TopicMeta:
        return await self.topology.change_topic(name, partitions=total)

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMeta:
        return await self.topology.change_topic(name, configs=configs)

    async def write_security(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write ACL or SCRAM credential records, durably (raises a StoreError)."""
        await self.topology.write_security(records)

    def reload_acls(self) -> None:
        """Put the ACLs of the state topic in force (at start, after CreateAcls/DeleteAcls, and
        whenever ACL records arrived otherwise: a follower gets its master's by replication)."""
        if self.authorizer is not None:
            seen = self.store.acl_changes  # before reading: a change meanwhile is read at the next check
            self.authorizer.replace({Acl.from_key(key) for key, _ in self.store.state_items(ACL_PREFIX)})
            self._acls_seen = seen

    def current_acls(self) -> Authorizer:
        """The authorizer, holding the ACLs the store holds now."""
        if self._acls_seen != self.store.acl_changes:
            self.reload_acls()
        return self.authorizer

    def coordinates(self, key: str) -> bool:
        """Is this node the coordinator of a consumer group or transactional id? (In a cluster:
        the master of the key's broker group.)"""
        return self.topology.coordinates(key)

    def permits(self, op: Op, resource_type: Res, name: str) -> bool:
        """`allowed`, without the audit log line of a denial (for a check the handler repeats)."""
        return self.authorizer is None or peer.node.get() or self.current_acls().authorize(
            peer.principal(), peer.client_ip(), op, resource_type, name)

    def allowed(self, op: Op, resource_type: Res, name: str) -> bool:
        """May the connection being served do `op` on the resource? Always, without an authorizer,
        and for another node of the cluster (peer.node)."""
        if self.authorizer is None or peer.node.get():
            return True
        who, host = peer.principal(), peer.client_ip()
        if self.current_acls().authorize(who, host, op, resource_type, name):
            return True
        audit.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s", who, op.name,
                   host, resource_type.name, name)
        return False

    def allowed_any(self, op: Op, resource_type: Res) -> bool:
        """Kafka's authorizeByResourceType for the connection being served."""
        if self.authorizer is None:
            return True
        return self.current_acls().authorize_any(peer.principal(), peer.client_ip(), op, resource_type)

    def authorized_operations(self, resource_type: Res, name: str) -> set[int] | None:
        """What Kafka reports when a client asks (None: Kafka's "not provided" value)."""
        if self.authorizer is None:
            return None
        return self.current_acls().operations(peer.principal(), peer.client_ip(), resource_type, name)

    def _endpoint(self) -> Listener:
        """The listener of the connection being served (the first one outside a connection)."""
        return peer.listener.get() or self.listeners[0]

    def advertised(self, lst: Listener) -> tuple[str, int]:
        """Where clients are told to reach a listener of this node."""
        return lst.advertised_host or lst.host or self.config.host, lst.advertised_port or lst.port

    @property
    def advertised_host(self) -> str:
        return self.advertised(self._endpoint())[0]

    @property
    def advertised_port(self) -> int:
        return self.advertised(self._endpoint())[1]

    def end_offsets(self) -> dict[tuple[str, str, int], int]:
        """(topic, topic id, partition) -> log end offset, for the producer-state snapshot."""
        return {(m.name, str(m.topic_id), p): self.store.high_watermark(m.name, p)
                for m in self.store.topics().values() for p in range(m.partitions)}

    def topic(self, name: str) -> TopicMeta | None:
        return self.store.topic(name)

    def auto_create(self, name: str) -> TopicMeta | None:
        """Create a topic a client asked for: the topic, or None while it is being made (the
        client asks again)."""
        return self.topology.auto_create(name, self.config["num.partitions"])

    def topic_config(self, meta: TopicMeta, name: str) -> str | None:
        """A topic's effective setting: its override, else the broker-wide value."""
        if name in meta.configs:
            return meta.configs[name]
        broker_name = TOPIC_TO_BROKER_CONFIG.get(name)
        return None if broker_name is None else str(self.config[broker_name])

    def max_message_bytes(self, meta: TopicMeta) -> int:
        return int(self.topic_config(meta, "max.message.bytes"))

    def log_append_time(self, meta: TopicMeta) -> bool:
        return self.topic_config(meta, "message.timestamp.type") == "LogAppendTime"


TOPIC_TO_BROKER_CONFIG = {
    "max.message.bytes": "message.max.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "message.timestamp.type": "log.message.timestamp.type",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
}


def new_cluster_id() -> str:
    return str(uuid.uuid4())
