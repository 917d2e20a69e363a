"""Gregor's znodes in ZooKeeper, through kazoo. Every call blocks: broker/cluster/node.py runs them in
worker threads, never on the event loop. Watches and session changes call `on_change` (from
kazoo's thread), which only wakes the cluster task; what changed is read again there.

Layout under the chroot of zookeeper.connect (docs/replication.md):
  /cluster_id                      the cluster id every node reports (made by the first node)
  /brokers/ids/<node.id>           ephemeral: a live node, JSON {host, port, group, replication_host, ..., listeners}
  /groups/<group>/members/<id>     persistent: the group's nodes (Metadata's replicas)
  /groups/<group>/state            persistent: master, epoch, sync-state set (cluster_state.GroupRecord),
                                   written only by compare-and-set on its version
  /topics/<name>                   persistent: the topic's id, configs and each partition's broker group
                                   (cluster_state.TopicRecord)
  /deleted_topics/<topic id>       persistent: a deleted topic, so no group's master publishes it again
  /topics_changed                  persistent: its version moves at every topic change (one watch for all)
  /latest_producer_id_block        persistent: the last block of producer ids a master took (Kafka's znode)
  /security/<state key, hex>       persistent: an ACL binding or SCRAM credential, its state value as data
                                   (broker/cluster/security.py)
  /security_changed                persistent: its version moves at every change under /security
  /security_groups/<group>         persistent: the group's master has published what only it held
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.cluster.state import GroupRecord, Snapshot, TopicRecord

log = logging.getLogger("gregor.zookeeper")


def reachable(connect: str, timeout_s: float) -> None:
    """Open and close one session with the ZooKeeper ensemble of `connect` (its chroot aside),
    raising kazoo's error if none is made within `timeout_s`; kazoo's warnings of each failed
    attempt stay out of the log (the caller says it in one line)."""
    quiet = logging.getLogger("kazoo.client")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    client = KazooClient(hosts=connect.partition("/")[0], timeout=max(timeout_s, 1.0))
    try:
        client.start(timeout=timeout_s)
    finally:
        quiet.setLevel(level)
        client.stop()
        client.close()


class ZooKeeper:
    def __init__(self, connect: str, group: str, session_timeout_ms: int, on_change: Callable[[], None]) -> None:
        self.group = group
        self._connect = connect
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self.session_timeout_s = session_timeout_ms / 1000
        self._on_change = on_change
        self.state = KazooState.LOST
        self.client.add_listener(self._session)

    def _session(self, state: str) -> None:
        self.state = state
        self._on_change()

    @property
    def connected(self) -> bool:
        return self.state == KazooState.CONNECTED

    def start(self, timeout_s: float) -> None:
        """Connect (raises kazoo's timeout error if ZooKeeper cannot be reached in time). The
        chroot of zookeeper.connect is made if missing, as Kafka makes it."""
        hosts, slash, chroot = self._connect.partition("/")
        if slash and chroot.strip("/"):
            root = KazooClient(hosts=hosts, timeout=self.session_timeout_s)
            root.start(timeout=timeout_s)
            try:
                root.ensure_path("/" + chroot.strip("/"))
            finally:
                root.stop()
                root.close()
        self.client.start(timeout=timeout_s)
        self.state = self.client.state
        for path in ("/brokers/ids", f"/groups/{self.group}/members", "/topics", "/deleted_topics",
                     "/topics_changed", "/security", "/security_changed", "/security_groups"):
            self.client.ensure_path(path)

    def stop(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # a dead connection: the session ends at its timeout anyway
            log.debug("closing the ZooKeeper client", exc_info=True)

    def cluster_id(self) -> str:
        """The cluster's id, made once by whichever node asks first."""
        try:
            self.client.create("/cluster_id", str(uuid.uuid4()).encode())
        except NodeExistsError:
            pass
        return self.client.get("/cluster_id")[0].decode()

    def register(self, node_id: int, info: dict) -> None:
        """This node's ephemeral znode. The znode of an earlier incarnation (a node killed and
        restarted within its session timeout) is waited out, as Kafka waits for its broker id."""
        self.client.ensure_path(f"/groups/{self.group}/members/{node_id}")
        path = f"/brokers/ids/{node_id}"
        deadline = time.monotonic() + self.session_timeout_s * 2 + 5
        while True:
            try:
                self.client.create(path, json.dumps(info).encode(), ephemeral=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self.client.get(path)
                except NoNodeError:  # its session ended just now: create it again
                    continue
                if stat.ephemeralOwner == self.client.client_id[0]:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node.id {node_id} is registered by another live broker "
                                       f"(ZooKeeper {path}); give this broker another node.id") from None
                time.sleep(0.2)
        self.client.ChildrenWatch("/brokers/ids", lambda _children: self._on_change())
        self.client.ChildrenWatch("/groups", lambda _children: self._on_change())
        self.client.DataWatch(self._state_path, lambda *_: self._on_change())
        self.client.DataWatch("/topics_changed", lambda *_: self._on_change())
        self.client.DataWatch("/security_changed", lambda *_: self._on_change())

    @property
    def _state_path(self) -> str:
        return f"/groups/{self.group}/state"

    def nodes(self) -> dict[int, dict]:
        """Every live node's registration, by node id."""
        out = {}
        for child in self.client.get_children("/brokers/ids"):
            try:
                out[int(child)] = json.loads(self.client.get(f"/brokers/ids/{child}")[0])
            except (NoNodeError, ValueError):
                continue
        return out

    def members(self) -> list[int]:
        return sorted(int(c) for c in self.client.get_children(f"/groups/{self.group}/members"))

    def snapshot(self, live: dict[int, dict]) -> Snapshot:
        try:
            data, stat = self.client.get(self._state_path)
            record, version = GroupRecord.decode(data), stat.version
        except NoNodeError:
            record, version = None, -1
        group_live = frozenset(n for n, info in live.items() if info.get("group") == self.group)
        return Snapshot(group_live, record, version)

    def write(self, record: GroupRecord, version: int) -> bool:
        """Compare-and-set the group's record; False if someone wrote it since `version`."""
        try:
            if version < 0:
                self.client.create(self._state_path, record.encode(), makepath=True)
            else:
                self.client.set(self._state_path, record.encode(), version=version)
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False

    # ---- every group (Metadata, coordinators) ---------------------------------------------
    def groups(self) -> dict[str, tuple[GroupRecord | None, list[int]]]:
        """Every broker group's record and nodes, by name."""
        out = {}
        for name in self.client.get_children("/groups"):
            try:
                record = GroupRecord.decode(self.client.get(f"/groups/{name}/state")[0])
            except NoNodeError:
                record = None
            try:
                members = sorted(int(c) for c in self.client.get_children(f"/groups/{name}/members"))
            except NoNodeError:
                members = []
            out[name] = (record, members)
        return out

    # ---- topics and their placement --------------------------------------------------------
    def topics_version(self) -> int:
        return self.client.exists("/topics_changed").version

    def topics_changed(self) -> None:
        self.client.set("/topics_changed", b"")

    def topics(self) -> tuple[dict[str, tuple[TopicRecord, int]], set[str]]:
        """(name -> (record, znode version), the ids of deleted topics)."""
        out = {}
        for name in self.client.get_children("/topics"):
            try:
                data, stat = self.client.get(f"/topics/{name}")
            except NoNodeError:
                continue
            out[name] = (TopicRecord.decode(data), stat.version)
        return out, set(self.client.get_children("/deleted_topics"))

    def create_topic(self, name: str, record: TopicRecord) -> bool:
        """False if the topic exists."""
        try:
            self.client.create(f"/topics/{name}", record.encode())
        except NodeExistsError:
            return False
        self.topics_changed()
        return True

    def set_topic(self, name: str, record: TopicRecord, version: int) -> bool:
        try:
            self.client.set(f"/topics/{name}", record.encode(), version=version)
        except (BadVersionError, NoNodeError):
            return False
        self.topics_changed()
        return True

    def delete_topic(self, name: str, topic_id: str) -> None:
        self.client.ensure_path(f"/deleted_topics/{topic_id}")
        try:
            self.client.delete(f"/topics/{name}")
        except NoNodeError:
            pass
        self.topics_changed()

    # ---- ACLs and SCRAM credentials, shared by every group ----------------------------------
    def security_version(self) -> int:
        return self.client.exists("/security_changed").version

    def security(self) -> dict[bytes, bytes]:
        """Every shared state record: key -> value."""
        out = {}
        for name in self.client.get_children("/security"):
            try:
                out[bytes.fromhex(name)] = self.client.get(f"/security/{name}")[0]
            except NoNodeError:
                continue
        return out

    def set_security(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write shared state records (a None value deletes one), then move /security_changed."""
        for key, value in records:
            path = f"/security/{key.hex()}"
            if value is None:
                try:
                    self.client.delete(path)
                except NoNodeError:
                    pass
                continue
            try:
                self.client.create(path, value)
            except NodeExistsError:
                self.client.set(path, value)
        self.client.set("/security_changed", b"")

    def security_joined(self, group: str) -> bool:
        return self.client.exists(f"/security_groups/{group}") is not None

    def join_security(self, group: str) -> None:
        self.client.ensure_path(f"/security_groups/{group}")

    # ---- producer ids ----------------------------------------------------------------------
    def reserve_producer_ids(self, size: int, floor: int) -> int:
        """The next block of `size` producer ids, at or above `floor`, taken by compare-and-set
        (Kafka's /latest_producer_id_block): no two groups' masters hand out the same id."""
        path = "/latest_producer_id_block"
        while True:
            try:
                data, stat = self.client.get(path)
                start, version = max(json.loads(data)["block_end"], floor), stat.version
            except NoNodeError:
                start, version = floor, -1
            value = json.dumps({"version": 1, "block_start": start, "block_end": start + size}).encode()
            try:
                if version < 0:
                    self.client.create(path, value)
                else:
                    self.client.set(path, value, version=version)
                return start
            except (NodeExistsError, BadVersionError):
                continue
