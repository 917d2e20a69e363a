"""Who leads, who is in sync, who coordinates: what handlers and the broker ask of the cluster
(Kafka's ReplicaManager and MetadataCache views of partitions; RocketMQ's HA service), and
`SingleNode`, the answers of a broker alone. A single node is a cluster of one: it leads every
partition, its sync-state set is itself, it coordinates every group and transaction, and its
topic changes go straight to its store. A broker group's node (broker/cluster/node.py, `Cluster`)
gives the same answers for a group of several through ZooKeeper; handlers never ask which one
they have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import trio

from protocol.errors import ErrorCode
from store import AdminBusy, Store, StoreError, TopicExists, TopicMeta

if TYPE_CHECKING:
    from broker.txn.coordinator import TxnCoordinator
    from broker.txn.producers import ProducerStateTable


class Topology(Protocol):
    """What the rest of the broker asks of the cluster this node is part of."""

    leading_epoch: int | None  # the master epoch while this node writes the commitlog; None while it does not
    draining: bool  # a clean stop: still leading, but taking no more writes

    @property
    def leading(self) -> bool: ...  # does this node write the commitlog (its group's master)?
    @property
    def master(self) -> int: ...  # the controller clients are told of: this group's master, -1 while none
    @property
    def epoch(self) -> int: ...  # the group's master epoch, as a follower checks a consumer's leader epoch
    @property
    def replicates_over_tls(self) -> bool: ...  # does the replication port speak TLS (its files reloadable)?
    @property
    def hands_over(self) -> bool: ...  # would a clean stop hand leadership to another node (drain first)?
    async def drain(self) -> None: ...  # a clean stop: refuse writes until the sync-state set holds all

    # partitions
    def leads(self, topic: str, partition: int) -> bool: ...
    def takes_writes(self, topic: str, partition: int) -> bool: ...
    def serves_reads(self, topic: str, partition: int) -> bool: ...  # as a follower (KIP-392)
    def partition_view(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int], list[int]]: ...
    def replicas(self) -> int: ...  # every partition's replication factor: the group's size
    def in_sync(self) -> int: ...  # the size of the sync-state set (Kafka's ISR)
    def preferred_read_replica(self, rack: str) -> int: ...  # KIP-392; -1: read at the master
    # brokers and coordinators
    def live_brokers(self) -> list[tuple[int, str | None, int | None, str | None]]: ...
    def broker_groups(self) -> list[dict[str, Any]]: ...  # each broker group as the web console shows it; [] alone
    def coordinates(self, key: str) -> bool: ...
    def coordinator(self, key: str) -> int: ...
    def endpoint(self, node: int) -> tuple[str, int] | None: ...  # another node's client address
    # writes
    def appended(self) -> None: ...  # the master appended: followers may fetch, the high watermark may move
    def holds(self, position: int) -> bool: ...  # does every member of the sync-state set hold the log below it?
    async def await_replicated(self, position: int, epoch: int, timeout_s: float) -> int: ...
    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta: ...
    async def delete_topic(self, name: str) -> None: ...
    async def change_topic(self, name: str, partitions: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMeta: ...
    def auto_create(self, name: str, partitions: int) -> TopicMeta | None: ...
    async def write_security(self, records: list[tuple[bytes, bytes | None]]) -> None: ...
    # the master's state and the admin API
    def serve_master_state(self, producers: ProducerStateTable, txn: TxnCoordinator) -> None: ...
    def reload_tls(self) -> None: ...
    def metrics(self) -> Iterator[Any]: ...


class SingleNode:
    """A broker alone: the cluster of one that every answer above describes."""

    leading_epoch: int | None = 0
    draining = False
    leading = True
    replicates_over_tls = False
    hands_over = False  # no other node to hand over to
    epoch = 0

    def __init__(self, store: Store, node_id: int, rack: str | None,
                 log_warning: Callable[..., None]) -> None:
        self.store, self.node_id, self.rack, self._warn = store, node_id, rack, log_warning

    @property
    def master(self) -> int:
        return self.node_id

    def leads(self, topic: str, partition: int) -> bool:
        return True

    def takes_writes(self, topic: str, partition: int) -> bool:
        return True

    def serves_reads(self, topic: str, partition: int) -> bool:
        return True

    def partition_view(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int], list[int]]:
        """(leader, leader epoch, replicas, ISR, offline replicas) as Metadata reports them."""
        node = self.node_id
        return node, self.store.leader_epoch(topic, partition), [node], [node], []

    def replicas(self) -> int:
        return 1

    def in_sync(self) -> int:
        return 1

    def preferred_read_replica(self, rack: str) -> int:
        return -1

    def live_brokers(self) -> list[tuple[int, str | None, int | None, str | None]]:
        """This node; its address is the listener's the client came in on (Metadata fills it in)."""
        return [(self.node_id, None, None, self.rack)]

    def broker_groups(self) -> list[dict[str, Any]]:
        return []  # no broker group: the console's overview shows this node alone

    def coordinates(self, key: str) -> bool:
        return True

    def coordinator(self, key: str) -> int:
        return self.node_id

    def endpoint(self, node: int) -> tuple[str, int] | None:
        return None

    def appended(self) -> None:
        pass

    def holds(self, position: int) -> bool:
        return True  # the sync-state set is this node

    async def await_replicated(self, position: int, epoch: int, timeout_s: float) -> int:
        return ErrorCode.NONE  # the sync-state set is this node, which holds what it appended

    # topic changes: the store's own, in a worker thread (making or removing a partition's files is disk work)
    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        return await trio.to_thread.run_sync(self.store.create_topic, name, partitions, configs)

    async def delete_topic(self, name: str) -> None:
        await trio.to_thread.run_sync(self.store.delete_topic, name)

    async def change_topic(self, name: str, partitions: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMeta:
        if partitions is not None:
            return await trio.to_thread.run_sync(self.store.add_partitions, name, partitions)
        return await trio.to_thread.run_sync(self.store.alter_topic_configs, name, configs)

    def auto_create(self, name: str, partitions: int) -> TopicMeta | None:
        """On the event loop (a few partitions: quick); None when another topic change holds the
        store (the client asks again) or the topic exists."""
        try:
            return self.store.create_topic(name, partitions, {}, wait=False)
        except (TopicExists, AdminBusy):
            return None
        except StoreError as exc:  # full disk, offline log dir, a reserved name: the topic stays unknown
            self._warn("auto-creating topic %s failed: %s", name, exc)
            return None

    async def write_security(self, records: list[tuple[bytes, bytes | None]]) -> None:
        await trio.to_thread.run_sync(self.store.write_state, records)

    def serve_master_state(self, producers: ProducerStateTable, txn: TxnCoordinator) -> None:
        pass  # producer ids from this node's own blocks; every transaction's partitions are here

    async def drain(self) -> None:
        pass

    def reload_tls(self) -> None:
        pass  # no replication port

    def metrics(self) -> Iterator[Any]:
        return iter(())

