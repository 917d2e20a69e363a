"""Shipping the commitlog from a group's master to its followers: one TCP stream per follower
for the whole commitlog (MetaQ's HA, seed 000 §7.6; RocketMQ's HAService on its own port),
not one per partition. The follower asks from a position, which tells the master it holds
everything below; the master answers with whole entries from there (Store.read_log) and the
position every member of the sync-state set holds (the follower's high watermark); the follower
writes them at the same positions and dispatches them as recovery does (Store.append_replicated).

The wire, big-endian (Gregor's own, between Gregor nodes only):
  follower -> master, once:  HELLO   magic "GRHA" | version u8 | node id i32 | last master epoch i32 | log end i64
  master -> follower, once:  WELCOME status i8 (0: ok, 1: not the master) | epoch i32 | truncate to i64
  follower -> master:        FETCH   position i64
  master -> follower:        CHUNK   start i64 | high watermark position i64 | log start position i64 |
                                     length i32 | entries
This module moves bytes; what they mean for the group (progress, the sync-state set, roles) is
broker/cluster.py's, and the truncation point broker/cluster_state.py's.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

import trio

from store import Store, StoreError

if TYPE_CHECKING:
    from broker.cluster import Cluster

log = logging.getLogger("gregor.replication")

MAGIC = b"GRHA"
VERSION = 1
HELLO = struct.Struct(">4sBiiq")
WELCOME = struct.Struct(">biq")
FETCH = struct.Struct(">q")
CHUNK = struct.Struct(">qqqi")
OK, NOT_MASTER = 0, 1
CHUNK_BYTES = 4 << 20  # at most this much per answer: big sequential copies, bounded memory
IDLE_WAIT_S = 0.05  # an idle follower's ask is answered empty after this (state writes wake nothing)
RETRY_FIRST_S, RETRY_MAX_S = 0.02, 1.0  # a follower's reconnection backoff


class ProtocolError(Exception):
    pass


async def receive_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = await stream.receive_some(size - len(buf))
        if not chunk:
            raise ProtocolError("the peer closed the replication stream")
        buf += chunk
    return bytes(buf)


# ---- the master's side --------------------------------------------------------------------
async def serve_follower(cluster: Cluster, stream: trio.SocketStream) -> None:
    """One follower's stream, for as long as this node leads in the epoch it welcomed it in."""
    async with stream:
        try:
            magic, version, node, follower_epoch, follower_end = HELLO.unpack(await receive_exactly(stream, HELLO.size))
            if magic != MAGIC or version != VERSION:
                log.warning("refused a replication stream: not a Gregor follower (magic %r, version %d)", magic, version)
                return
            epoch = cluster.leading_epoch
            if epoch is None:
                await stream.send_all(WELCOME.pack(NOT_MASTER, -1, -1))
                return
            truncate_to = cluster.truncation_point(follower_epoch, follower_end)
            await stream.send_all(WELCOME.pack(OK, epoch, truncate_to))
            log.info("node %d follows from commitlog position %d (its log ended at %d, epoch %d)",
                     node, truncate_to, follower_end, follower_epoch)
            await _ship(cluster, stream, node, epoch)
        except (ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("replication stream closed: %s", exc)
        except ValueError as exc:  # a position retention deleted: this follower must start over from a copy
            log.error("cannot serve a follower: %s", exc)


async def _ship(cluster: Cluster, stream: trio.SocketStream, node: int, epoch: int) -> None:
    store = cluster.store
    try:
        while cluster.leading_epoch == epoch:
            (position,) = FETCH.unpack(await receive_exactly(stream, FETCH.size))
            if position > store.log_end_position:
                raise ProtocolError(f"node {node} asks from {position}, past this log's end {store.log_end_position}")
            cluster.fetched(node, position)
            if position >= store.log_end_position:
                await cluster.wait_for_appends(position, IDLE_WAIT_S)
            if cluster.leading_epoch != epoch:
                break
            start, data = await trio.to_thread.run_sync(store.read_log, position, CHUNK_BYTES)
            await stream.send_all(CHUNK.pack(start, cluster.hw_position, store.log_start_position, len(data)) + data)
    finally:
        cluster.disconnected(node)


# ---- the follower's side ------------------------------------------------------------------
async def follow(cluster: Cluster, node: int, host: str, port: int, epoch: int) -> None:
    """Follow master `node` at host:port until cancelled; reconnects after a failure, soon at
    first (a new master welcomes followers a moment after ZooKeeper names it), then backing off
    to a second."""
    backoff = RETRY_FIRST_S
    while True:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            log.info("cannot reach master %d at %s:%d for replication: %s", node, host, port, exc)
        else:
            welcomed: list[bool] = []  # set once the master welcomed this stream
            async with stream:
                try:
                    await _pull(cluster, stream, node, epoch, welcomed)
                    backoff = RETRY_FIRST_S  # not the master yet: it will be in a moment
                except (ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    log.info("replication from master %d interrupted: %s", node, exc)
                except StoreError as exc:  # ReplicationError (diverged) or a full or failing disk
                    log.error("cannot apply what master %d shipped: %s", node, exc)
            if welcomed:  # a stream that ran: its next attempt starts soon again
                backoff = RETRY_FIRST_S
        await trio.sleep(backoff)
        backoff = min(backoff * 2, RETRY_MAX_S)


async def _pull(cluster: Cluster, stream: trio.SocketStream, node: int, epoch: int, welcomed: list[bool]) -> None:
    """Pull until the stream fails; returns at once if `node` is not (yet) the master."""
    store: Store = cluster.store
    epochs = store.master_epochs()
    my_epoch = epochs[-1][0] if epochs else 0
    await stream.send_all(HELLO.pack(MAGIC, VERSION, cluster.node_id, my_epoch, store.log_end_position))
    status, master_epoch, truncate_to = WELCOME.unpack(await receive_exactly(stream, WELCOME.size))
    if status != OK:
        log.debug("node %d is not the master yet (or any more)", node)
        return
    if master_epoch != epoch:
        raise ProtocolError(f"node {node} leads in epoch {master_epoch}, expected {epoch}")
    welcomed.append(True)
    if truncate_to < store.log_end_position:
        log.warning("truncating the commitlog from %d to %d: the new master (node %d, epoch %d) never had "
                    "what follows", store.log_end_position, truncate_to, node, epoch)
        await trio.to_thread.run_sync(store.truncate_log, truncate_to)
    position = store.log_end_position
    retained_from = store.log_start_position
    while True:
        await stream.send_all(FETCH.pack(position))
        start, hw_position, master_start, length = CHUNK.unpack(await receive_exactly(stream, CHUNK.size))
        if length:
            data = await receive_exactly(stream, length)
            position = await trio.to_thread.run_sync(store.append_replicated, start, data)
        store.replicated_to(min(hw_position, position))
        if master_start > retained_from:  # the master's retention deleted segments: so does this log
            retained_from = master_start
            await trio.to_thread.run_sync(store.follow_retention, master_start)
