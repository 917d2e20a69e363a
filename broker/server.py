"""Start and stop a broker: open the store off the event loop, listen, serve
each connection in its own task, and close everything on cancellation.
"""

from __future__ import annotations

import errno
import gc
import logging
import socket
import sys
from functools import partial
from pathlib import Path

import trio

from broker.broker import Broker, new_cluster_id
from broker.cluster.node import Cluster
from broker.config import BrokerConfig, StartupError
from broker.net.connection import serve_connection
from broker.cluster.zk import reachable
from broker.txn.producers import restore
from store import Store, StoreError

log = logging.getLogger("gregor.server")


def _cluster_id(data_dir: Path) -> str:
    path = data_dir / "cluster_id"
    if path.exists():
        return path.read_text().strip()
    cluster_id = new_cluster_id()
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(cluster_id)
    tmp.replace(path)
    return cluster_id


async def serve(config: BrokerConfig, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    # every address first, then ZooKeeper, then the data directory: a start that cannot listen or
    # reach its group creates nothing on the way
    opened = []  # (Listener with its bound port, trio listeners)
    for lst in config.listeners():
        sockets = await _listen(f"listener {lst.name}", lst.host, lst.port)
        opened.append((lst.with_port(sockets[0].socket.getsockname()[1]), sockets))
    grouped = bool(config["zookeeper.connect"].strip())  # a broker group: the master writes, followers replicate
    replication = await _listen("replication.port", config.host, config["replication.port"]) if grouped else None
    admin = _bind_admin(config.host, config.admin_port) if config.admin_port is not None else None
    if grouped:
        await _reach_zookeeper(config)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        store = await trio.to_thread.run_sync(Store.open, config.data_dir, config.store_config())
    except StoreError as exc:  # another broker holds the directory, a file it cannot read
        raise StartupError(str(exc)) from None
    broker = None
    try:
        broker = Broker(config, store, await trio.to_thread.run_sync(_cluster_id, config.data_dir))
        replayed = await trio.to_thread.run_sync(restore, broker.producers, store)
        log.info("idempotent-producer state restored (%d batches replayed)", replayed)
        broker.load_listener_tls()  # with the dynamic settings the commitlog holds (broker/security/dynamic_tls.py)
        broker.listeners = [lst for lst, _ in opened]
        broker.port = broker.listeners[0].port
        async with trio.open_nursery() as nursery:
            if grouped:
                await _join_group(nursery, broker, replication)
            else:
                nursery.start_soon(broker.run_master_services)
            nursery.start_soon(broker.follow_dynamic_settings)  # changes made at other nodes
            for lst, sockets in opened:
                handler = partial(serve_connection, broker, lst)
                nursery.start_soon(partial(trio.serve_listeners, handler, sockets, handler_nursery=nursery))
            if config.admin_port is not None:
                # imported only here: hypercorn is a tenth of the broker's start-up imports
                from broker.net.admin_http import serve_admin
                address = broker.admin_address = await nursery.start(serve_admin, broker, admin)
                print(f"gregor admin API on http://{address}", file=sys.stderr, flush=True)
            # Everything built so far (modules, protocol schemas, the store's state) lives as long
            # as the process: out of the cyclic GC's reach, a full collection scans only what came
            # later. Without it, the allocations of a log-cleaner pass set off full collections of
            # 30-40 ms each, which stalled the event loop (produce p99 while cleaning; store/compaction.py).
            gc.freeze()
            if config["listeners"].strip():
                for lst in broker.listeners:
                    print(f"gregor listener {lst.name}://{lst.host}:{lst.port}", file=sys.stderr, flush=True)
            print(f"gregor ready: listening on {broker.listeners[0].host or config.host}:{broker.port} "
                  f"(node {broker.node_id}, data dir {config.data_dir})", file=sys.stderr, flush=True)
            task_status.started(broker)
    finally:
        with trio.CancelScope(shield=True):
            if broker is not None:
                await broker.snapshot_producers()
            await trio.to_thread.run_sync(store.close)
            log.info("store closed cleanly")


async def _listen(what: str, host: str, port: int) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        why = ("address already in use (is another broker running? choose another port)"
               if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc)).lower())
        raise StartupError(f"cannot listen on {host or '*'}:{port} ({what}): {why}") from None


def _bind_admin(host: str, port: int) -> socket.socket:
    """The admin API's socket, bound before anything is created (hypercorn serves it by fd)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = ("address already in use (is another broker running? choose another --admin-port)"
               if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc)).lower())
        raise StartupError(f"cannot listen on {host}:{port} (--admin-port): {why}") from None
    sock.listen(128)
    return sock


async def _reach_zookeeper(config: BrokerConfig) -> None:
    """Connect to ZooKeeper once before the data directory is touched: unreachable, the start
    stops with one line after zookeeper.connection.timeout.ms (Kafka's wait), kazoo's retry
    warnings kept out of the log meanwhile."""
    connect = config["zookeeper.connect"].strip()
    timeout_s = config["zookeeper.connection.timeout.ms"] / 1000
    log.info("connecting to ZooKeeper at %s (up to %g s)", connect, timeout_s)
    try:
        await trio.to_thread.run_sync(reachable, connect, timeout_s)
    except Exception as exc:  # noqa: BLE001 - kazoo's timeout and connection errors: one line
        raise StartupError(f"cannot reach ZooKeeper at {connect} within {timeout_s:g} s "
                           f"(zookeeper.connect, zookeeper.connection.timeout.ms): {exc or type(exc).__name__}") from None


async def _join_group(nursery: trio.Nursery, broker: Broker, sockets: list[trio.SocketListener]) -> None:
    """Register in ZooKeeper on the bound replication port and take this node's role; returns
    once the role is known (master, follower, or waiting for a master)."""
    config = broker.config
    host, port = config.host or "127.0.0.1", sockets[0].socket.getsockname()[1]
    if config["replication.advertised.listener"].strip():
        host, _, advertised_port = config["replication.advertised.listener"].strip().rpartition(":")
        port = int(advertised_port)
    info = {"version": 1, "host": broker.advertised_host, "port": broker.advertised_port,
            "group": config["broker.group"], "replication_host": host, "replication_port": port,
            "rack": config["broker.rack"] or None,
            # every listener as clients are told it: another node answers each client with the
            # addresses of the listener it came in on, as Kafka's brokers do (Cluster.address)
            "listeners": {lst.name: list(broker.advertised(lst)) for lst in broker.listeners}}
    cluster = Cluster(broker)
    broker.topology = cluster
    cluster.serve_master_state(broker.producers, broker.txn)  # any node answers InitProducerId
    await nursery.start(cluster.run, sockets, info)
