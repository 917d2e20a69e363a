"""Start and stop a broker: open the store off the event loop, listen, serve
each connection in its own task, and close everything on cancellation.
"""

from __future__ import annotations

import gc
import logging
import sys
from functools import partial
from pathlib import Path

import trio

from broker.broker import Broker, new_cluster_id
from broker.cluster.node import Cluster
from broker.config import BrokerConfig
from broker.net.connection import serve_connection
from broker.txn.producers import restore
from store import Store

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
    config.data_dir.mkdir(parents=True, exist_ok=True)
    store = await trio.to_thread.run_sync(Store.open, config.data_dir, config.store_config())
    broker = None
    try:
        broker = Broker(config, store, await trio.to_thread.run_sync(_cluster_id, config.data_dir))
        replayed = await trio.to_thread.run_sync(restore, broker.producers, store)
        log.info("idempotent-producer state restored (%d batches replayed)", replayed)
        opened = []  # (Listener with its bound port, trio listeners)
        broker.load_listener_tls()  # with the dynamic settings the commitlog holds (broker/security/dynamic_tls.py)
        for lst in broker.listeners:
            sockets = await trio.open_tcp_listeners(lst.port, host=lst.host or None)
            opened.append((lst.with_port(sockets[0].socket.getsockname()[1]), sockets))
        broker.listeners = [lst for lst, _ in opened]
        broker.port = broker.listeners[0].port
        async with trio.open_nursery() as nursery:
            if config["zookeeper.connect"].strip():  # a broker group: the master writes, followers replicate
                await _join_group(nursery, broker)
            else:
                nursery.start_soon(broker.run_master_services)
            for lst, sockets in opened:
                handler = partial(serve_connection, broker, lst)
                nursery.start_soon(partial(trio.serve_listeners, handler, sockets, handler_nursery=nursery))
            if config.admin_port is not None:
                # imported only here: hypercorn is a tenth of the broker's start-up imports
                from broker.net.admin_http import serve_admin
                admin = await nursery.start(serve_admin, broker, config.host, config.admin_port)
                print(f"gregor admin API on http://{admin}", file=sys.stderr, flush=True)
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


async def _join_group(nursery: trio.Nursery, broker: Broker) -> None:
    """Open the replication port, register in ZooKeeper and take this node's role; returns once
    the role is known (master, follower, or waiting for a master)."""
    config = broker.config
    sockets = await trio.open_tcp_listeners(config["replication.port"], host=config.host or None)
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
