"""Shipping the commitlog from a group's master to its followers: one TCP stream per follower
for the whole commitlog (MetaQ's HA, §7.6 of MetaQ's design notes; RocketMQ's HAService on its own port),
not one per partition. As RocketMQ's HAConnection, the master pushes and the follower reports:
once the follower said where its log ends, the master sends whole entries from there
(Store.read_log_tail on the loop for a follower up to 64 MiB behind, Store.read_log in a worker
thread otherwise; the bytes leave with sendfile from the segment's file, _SegmentFile, no copy in
Python or from the mapping) as they are appended, with at most CHUNKS_IN_FLIGHT chunks it has
not answered yet, and with each chunk the position every member of the sync-state set holds
(the follower's high watermark). The follower writes each chunk at the same positions and
dispatches it as recovery does (Store.append_replicated) while the next chunk arrives
(received straight into a reused buffer, woken once per RECEIVE_LOWAT of it; applied on its
event loop for a small chunk with no state record, INLINE_APPLY_BYTES; in a worker thread
otherwise), then reports the position it holds: that report is what moves the master's high
watermark (acks=all). With security.inter.broker.protocol=SSL the same bytes go through TLS
(broker/cluster/tls.py): no sendfile then, and the follower copies what TLS decrypted.

The wire, big-endian (Gregor's own, between Gregor nodes only):
  follower -> master, once:  HELLO   magic "GRHA" | version u8 | node id i32 | last master epoch i32 | log end i64
  master -> follower, once:  WELCOME status i8 (0: ok, 1: not the master, 2: start over) | epoch i32 |
                                     truncate to i64 (start over: the master's first position)
                             start over only: COPY  end i64 | length i32 | JSON {"<topic id>/<p>": [log start,
                                     log end]}: the master's position and queue bounds to derive the copy at
                                     (the follower's log ends below the master's first position: Store.start_over)
  follower -> master:        HOLDS   position i64: it holds the commitlog below; the first one (its
                                     log end once truncated) is where shipping starts
  master -> follower:        CHUNK   start i64 | high watermark position i64 | log start position i64 |
                                     length i32 | entries; an empty one after IDLE_WAIT_S without
                                     appends (the follower answers each chunk, empty or not, with HOLDS)
The same port takes another group's transaction coordinator: MARKERS_MAGIC | version u8, then
one WriteTxnMarkers request frame, answered with its response frame (broker/cluster/inter_broker.py).
With security.inter.broker.protocol=SASL_* every connection first carries the connecting
node's SASL login (broker/cluster/sasl.py, in broker/cluster/node.py's connect_node and
_serve_replication): this module sees the stream after it.
This module moves bytes; what they mean for the group (progress, the sync-state set, roles) is
broker/cluster/node.py's, and the truncation point broker/cluster/state.py's.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import struct
from typing import Protocol

import trio

from broker.cluster.sasl import AuthenticationRefused
from broker.cluster.tls import NodeTls
from broker.net.pipes import AVAILABLE as SPLICE_AVAILABLE
from broker.net.pipes import PIPE_BYTES, open_pipe
from broker.net.sendmsg import send_buffers
from store import StorageFull, Store, StoreError
from store.errors import ReplicationError


class Cluster(Protocol):
    """What shipping needs of this node (broker/cluster/node.py's Cluster): its store, its role,
    the master's record of each follower's progress, and connections to other nodes."""

    store: Store
    node_id: int
    leading_epoch: int | None
    hw_position: int
    tls: NodeTls | None

    def truncation_point(self, follower_epoch: int, follower_end: int) -> int: ...
    def fetched(self, node: int, position: int) -> None: ...
    def disconnected(self, node: int) -> None: ...
    def master_answers(self, node: int, answers: bool) -> None: ...
    async def wait_for_appends(self, position: int, timeout_s: float) -> None: ...
    async def connect_node(self, host: str, port: int) -> trio.abc.Stream: ...
    async def serve_markers(self, stream: trio.abc.Stream, version: int) -> None: ...

log = logging.getLogger("gregor.replication")
_versions_logged: set[tuple[str, int]] = set()  # (who, replication version) already logged

MAGIC = b"GRHA"
MARKERS_MAGIC = b"GRTM"  # instead of HELLO: a transaction coordinator's WriteTxnMarkers (broker/cluster/inter_broker.py)
VERSION = 2  # 1: the follower asked for each chunk (FETCH) and applied it before asking again
HELLO = struct.Struct(">4sBiiq")
# The part of HELLO every version keeps, and the WELCOME (OTHER_VERSION) a master of any version
# answers a follower of another one with: a mismatch is named, not a silent closed stream.
HELLO_HEAD = struct.Struct(">4sB")
WELCOME = struct.Struct(">biq")
HOLDS = struct.Struct(">q")
CHUNK = struct.Struct(">qqqi")
COPY = struct.Struct(">qi")
# WELCOME's status; OTHER_VERSION carries the master's replication version in the epoch field
OK, NOT_MASTER, START_OVER, OTHER_VERSION = 0, 1, 2, 3
CHUNK_BYTES = 4 << 20  # at most this much per chunk (at least one entry): big sequential writes
# Chunks shipped and not yet answered: one applied while the next one arrives. What is appended
# meanwhile waits at the master and leaves as one chunk: under load chunks grow, instead of one
# per small append (10,000 partitions: ~1 KiB entries).
CHUNKS_IN_FLIGHT = 2
BUFFERS = CHUNKS_IN_FLIGHT  # a follower's receive buffers: one is freed before the report that lets a third chunk go
# A follower applies a chunk up to this size with no state record in it on its event loop, as a
# master appends a produced batch (up to max.message.bytes) on its own: two thread hops per chunk
# were a large part of an acks=all round trip under small requests (docs/notes/benchmark-history.md).
INLINE_APPLY_BYTES = 1 << 20
# A follower is woken when this much of a chunk has arrived (SO_RCVLOWAT), or the rest of it, not
# for each 64 KiB segment the loopback or a NIC delivers: a cross-CPU wake-up per segment was a
# large part of the master's sendmsg (docs/notes/benchmark-history.md). The kernel caps it at half tcp_rmem's
# largest buffer (3 MiB by default).
RECEIVE_LOWAT = 1 << 20
# ... but not for a chunk's rest smaller than this: it arrives in a few segments, and the two
# setsockopt calls would cost more than the wake-ups they save (64 KiB requests: one chunk each).
LOWAT_FROM = 256 << 10
IDLE_WAIT_S = 0.05  # an empty chunk after this without appends: the follower's hw, and its report
RETRY_FIRST_S, RETRY_MAX_S = 0.02, 1.0  # a follower's reconnection backoff
FULL_RETRY_S = 1.0  # a follower whose disk is full tries the chunk again this often (its stream stays open)


class ProtocolError(Exception):
    pass


class StreamClosed(ProtocolError):
    """The peer closed the stream (end of file)."""


class OtherVersion(ProtocolError):
    """The master runs another replication version: this node cannot follow it until both run
    the same Gregor version."""


def _log_other_version(context: str, who: str, version: int) -> None:
    """One error line per peer and version, not one at every reconnection."""
    if (who, version) not in _versions_logged:
        _versions_logged.add((who, version))
        log.error("%s: %s runs replication version %d and this node version %d: the nodes of a broker group "
                  "must run the same Gregor version (stop the group's nodes, upgrade them all, start them "
                  "again); until then neither can follow the other", context, who, version, VERSION)


async def receive_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = await stream.receive_some(size - len(buf))
        if not chunk:
            raise StreamClosed("the peer closed the replication stream")
        buf += chunk
    return bytes(buf)


def _socket(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The TCP socket a plain stream's bytes go through straight (sendfile, recv_into); None
    through TLS (security.inter.broker.protocol=SSL, broker/cluster/tls.py)."""
    return stream.socket if isinstance(stream, trio.SocketStream) else None


def _socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType:
    """The TCP socket under a stream, TLS or not."""
    return stream.transport_stream.socket if isinstance(stream, trio.SSLStream) else stream.socket


# ---- the master's side --------------------------------------------------------------------
async def serve_follower(cluster: Cluster, stream: trio.abc.Stream) -> None:
    """One follower's stream, for as long as this node leads in the epoch it welcomed it in."""
    async with stream:
        try:
            head = await receive_exactly(stream, HELLO_HEAD.size)
            magic, version = HELLO_HEAD.unpack(head)
            if magic == MARKERS_MAGIC:
                await cluster.serve_markers(stream, version)
                return
            if magic != MAGIC:
                log.warning("refused a replication stream: not a Gregor follower (magic %r)", magic)
                return
            if version != VERSION:  # whatever follows in its HELLO, it reads this WELCOME: it says why
                _log_other_version("refused a replication stream", f"a node at {_socket_of(stream).getpeername()[0]}",
                                   version)
                await stream.send_all(WELCOME.pack(OTHER_VERSION, VERSION, -1))
                return
            _, _, node, follower_epoch, follower_end = HELLO.unpack(
                head + await receive_exactly(stream, HELLO.size - HELLO_HEAD.size))
            epoch = cluster.leading_epoch
            if epoch is None:
                await stream.send_all(WELCOME.pack(NOT_MASTER, -1, -1))
                return
            truncate_to = cluster.truncation_point(follower_epoch, follower_end)
            if truncate_to < cluster.store.log_start_position:  # retention deleted what it lacks
                first, end, queues = await trio.to_thread.run_sync(cluster.store.replica_bounds)
                bounds = json.dumps(queues).encode()
                await stream.send_all(WELCOME.pack(START_OVER, epoch, first) + COPY.pack(end, len(bounds)) + bounds)
                log.warning("node %d's commitlog ends at %d, below this log's first position %d: it starts over "
                            "from a copy of this one", node, follower_end, first)
            else:
                await stream.send_all(WELCOME.pack(OK, epoch, truncate_to))
                log.info("node %d follows from commitlog position %d (its log ended at %d, epoch %d)",
                         node, truncate_to, follower_end, follower_epoch)
            await _ship(cluster, stream, node, epoch)
        except* (ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            log.info("replication stream closed: %s", group.exceptions[0])
        except* ValueError as group:  # retention deleted the position meanwhile: the follower says hello again
            log.warning("cannot serve a follower: %s", group.exceptions[0])


async def _ship(cluster: Cluster, stream: trio.abc.Stream, node: int, epoch: int) -> None:
    store = cluster.store
    sock = _socket(stream)
    (shipped,) = HOLDS.unpack(await receive_exactly(stream, HOLDS.size))
    progress = _Progress()
    files = _SegmentFile(store)
    try:
        progress.report(cluster, node, shipped)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_reports, cluster, stream, node, progress)
            while cluster.leading_epoch == epoch:
                if progress.in_flight >= CHUNKS_IN_FLIGHT:
                    with trio.move_on_after(IDLE_WAIT_S):  # and look at the epoch again meanwhile
                        await progress.reported.wait()
                    continue
                if store.log_end_position <= shipped:
                    await cluster.wait_for_appends(shipped, IDLE_WAIT_S)
                    if cluster.leading_epoch != epoch:
                        break
                if store.log_end_position <= shipped:
                    start, data = shipped, memoryview(b"")
                else:  # a follower close behind is shipped what was just appended: no thread hop for that
                    # (one per chunk, ~750 chunks/s under load at 10,000 partitions: docs/notes/benchmark-history.md)
                    start, data = shipped, store.read_log_tail(shipped, CHUNK_BYTES)
                    if data is None:
                        start, data = await trio.to_thread.run_sync(store.read_log, shipped, CHUNK_BYTES)
                header = CHUNK.pack(start, cluster.hw_position, store.log_start_position, len(data))
                progress.in_flight += 1
                if sock is None:  # TLS: no sendfile, the bytes are encrypted from the mapping
                    await stream.send_all(header)
                    if data:
                        await stream.send_all(data)
                elif not (data and await files.send(sock, header, start, len(data))):
                    await send_buffers(sock, [header, data] if data else [header])
                shipped = start + len(data)
            nursery.cancel_scope.cancel()
    finally:
        files.close()
        cluster.disconnected(node)


class _SegmentFile:
    """Chunks leave with sendfile() from the commitlog segment's file: the kernel hands the
    page-cache pages to the socket instead of copying them in from the mapping, which was the
    largest part of a master's sendmsg per follower (docs/notes/benchmark-history.md). The segment is opened
    by its path, once, with a descriptor of this stream's own: retention closing the store's
    descriptor (in a worker thread) cannot pull it away between two sendfile calls, and a
    segment deleted meanwhile stays readable through it. A segment's bytes never change while
    this node leads (appends only; the cleaner appends relocated entries, store/compaction.py),
    and a stream lives no longer than one epoch of leading, so the open file is never stale."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.fd = -1
        self.start = self.end = 0  # the positions the open segment holds

    async def send(self, sock: trio.socket.SocketType, header: bytes, position: int, length: int) -> bool:
        """Send header, then the log's bytes [position, position+length) from one segment;
        False, having sent nothing, when the segment's file cannot be opened (the caller sends
        the bytes from the mapping)."""
        if not self.start <= position < self.end:
            self.close()
            found = self.store.log_segment_file(position)
            if found is None:
                return False
            path, self.start, self.end = found
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:  # deleted meanwhile, or out of descriptors
                self.start = self.end = 0
                return False
        await send_buffers(sock, [header])  # alone: with MSG_MORE, sendfile's last bytes waited for a timer (20 MB/s)
        offset, left = position - self.start, length
        while left:
            try:
                n = os.sendfile(sock.fileno(), self.fd, offset, left)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            if n == 0:
                raise ProtocolError(f"the commitlog's file ends before position {position + length - left}")
            offset += n
            left -= n
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.start = self.end = 0


class _Progress:
    """The chunks a follower has not answered yet; `reported` is set (and replaced) on each report."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.reported = trio.Event()

    def report(self, cluster: Cluster, node: int, position: int) -> None:
        if position > cluster.store.log_end_position:
            raise ProtocolError(f"node {node} holds up to {position}, past this log's end {cluster.store.log_end_position}")
        cluster.fetched(node, position)
        self.reported.set()
        self.reported = trio.Event()


async def _read_reports(cluster: Cluster, stream: trio.SocketStream, node: int, progress: _Progress) -> None:
    while True:
        (position,) = HOLDS.unpack(await receive_exactly(stream, HOLDS.size))
        progress.in_flight -= 1
        progress.report(cluster, node, position)


# ---- the follower's side ------------------------------------------------------------------
async def follow(cluster: Cluster, node: int, host: str, port: int, epoch: int) -> None:
    """Follow master `node` at host:port until cancelled; reconnects after a failure, soon at
    first (a new master welcomes followers a moment after ZooKeeper names it), then backing off
    to a second."""
    backoff = RETRY_FIRST_S
    last_error = ""  # the store error the last stream ended on
    while True:
        try:
            stream = await cluster.connect_node(host, port)
        except OSError as exc:
            log.info("cannot reach master %d at %s:%d for replication: %s", node, host, port, exc)
            if _refused(exc):
                cluster.master_answers(node, False)
        except trio.BrokenResourceError as exc:  # TLS's handshake or the SASL login failed (broker/node_*.py)
            error = f"{exc.__cause__ or exc}"
            what = "SASL login failed" if isinstance(exc, AuthenticationRefused) else "TLS handshake failed"
            (log.debug if error == last_error else log.error)(
                "cannot follow master %d at %s:%d: %s (%s)", node, host, port, what, error)
            last_error = error
        else:
            cluster.master_answers(node, True)
            welcomed: list[bool] = []  # set once the master welcomed this stream
            store_failed = False
            async with stream:
                try:
                    await _pull(cluster, stream, node, epoch, welcomed)
                    backoff = RETRY_FIRST_S  # not the master yet: it will be in a moment
                except* (ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
                    if not welcomed and cluster.tls is not None:  # TLS 1.3: a refusal shows after the handshake
                        error = f"{group.exceptions[0].__cause__ or group.exceptions[0]}"
                        (log.debug if error == last_error else log.error)(
                            "master %d closed the TLS connection before welcoming this node (%s): its log says "
                            "why (this node's certificate, or its principal not allowed ClusterAction)", node, error)
                        last_error = error
                    else:
                        log.info("replication from master %d interrupted: %s", node, group.exceptions[0])
                    if welcomed and all(_ended(e) for e in group.exceptions):
                        cluster.master_answers(node, False)  # until the next connection: in 20 ms
                except* StoreError as group:  # ReplicationError (diverged) or a failing disk
                    # logged once while it repeats, and retried with the growing backoff: at
                    # once, each reconnection logged a line on both nodes every 20 ms
                    store_failed = True
                    error = str(group.exceptions[0])
                    (log.debug if error == last_error else log.error)(
                        "cannot apply what master %d shipped: %s", node, error)
                    last_error = error
            if welcomed and not store_failed:  # a stream that ran: its next attempt starts soon again
                backoff = RETRY_FIRST_S
        await trio.sleep(backoff)
        backoff = min(backoff * 2, RETRY_MAX_S)


def _refused(exc: OSError) -> bool:
    """Did the master's host answer that nothing listens on the port? (trio's open_tcp_stream
    raises one OSError with each address's error in its cause.) A timeout or an unreachable
    network says nothing about the master, so only a refusal counts."""
    errors = getattr(exc.__cause__, "exceptions", None) or (exc,)
    return all(isinstance(e, ConnectionRefusedError) for e in errors)


def _ended(exc: BaseException) -> bool:
    """Did the master's end close or reset the stream (its process died, or it stopped leading),
    rather than the stream stalling or this side failing? The host of a SIGKILLed master closes
    its sockets at once, before clients ask who leads now."""
    while isinstance(exc, trio.BrokenResourceError):  # through TLS: the SSL stream's, around the socket's
        exc = exc.__cause__
    # through TLS, a closed socket under the stream is an EOF without TLS's close_notify
    return isinstance(exc, (StreamClosed, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError))


async def _pull(cluster: Cluster, stream: trio.abc.Stream, node: int, epoch: int, welcomed: list[bool]) -> None:
    """Pull until the stream fails; returns at once if `node` is not (yet) the master."""
    store: Store = cluster.store
    epochs = store.master_epochs()
    my_epoch = epochs[-1][0] if epochs else 0
    await stream.send_all(HELLO.pack(MAGIC, VERSION, cluster.node_id, my_epoch, store.log_end_position))
    status, master_epoch, truncate_to = WELCOME.unpack(await receive_exactly(stream, WELCOME.size))
    if status == OTHER_VERSION:  # master_epoch is the master's version
        _log_other_version(f"cannot follow master {node}", f"node {node}", master_epoch)
        raise OtherVersion(f"master {node} runs replication version {master_epoch}, this node {VERSION}")
    if status not in (OK, START_OVER):
        log.debug("node %d is not the master yet (or any more)", node)
        return
    if master_epoch != epoch:
        raise ProtocolError(f"node {node} leads in epoch {master_epoch}, expected {epoch}")
    welcomed.append(True)
    if status == START_OVER:  # the master's retention deleted what this log lacks: copy its log from its start
        end, size = COPY.unpack(await receive_exactly(stream, COPY.size))
        queues = {key: (bound[0], bound[1]) for key, bound in json.loads(await receive_exactly(stream, size)).items()}
        await trio.to_thread.run_sync(store.start_over, truncate_to, end, queues)
    elif truncate_to < store.log_end_position:
        log.warning("truncating the commitlog from %d to %d: the new master (node %d, epoch %d) never had "
                    "what follows", store.log_end_position, truncate_to, node, epoch)
        await trio.to_thread.run_sync(store.truncate_log, truncate_to)
    position = store.log_end_position
    retained_from = store.log_start_position
    await stream.send_all(HOLDS.pack(position))
    # Chunks are received (spliced into the commitlog's file, or into reused buffers, BUFFERS)
    # while the previous one is applied (a small one on this loop, meanwhile the kernel's socket
    # buffer takes the next); a buffer is free again before the HOLDS report that lets the master
    # send more.
    free_send, free = trio.open_memory_channel[bytearray](BUFFERS)
    for _ in range(BUFFERS):
        free_send.send_nowait(bytearray(CHUNK_BYTES))
    arrived_send, arrived = trio.open_memory_channel[tuple](1)
    # Plain streams splice chunks into the commitlog's file (_Splicer); not while starting over
    # (the store is opened again when the copy is derived), nor through TLS.
    splicer = _Splicer.open(store) if status == OK and _socket(stream) is not None else None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_receive_chunks, stream, free, arrived_send, splicer)
            async for start, hw_position, master_start, buffer, length in arrived:
                position = await _apply(store, node, start, buffer, length, position)
                if buffer is not None and len(buffer) == CHUNK_BYTES:
                    free_send.send_nowait(buffer)
                copied_to = store.starting_over
                if copied_to is not None and position >= copied_to:  # a copy (START_OVER) complete: derive it
                    await trio.to_thread.run_sync(store.finish_start_over)
                    retained_from = store.log_start_position
                store.replicated_to(min(hw_position, position))
                await stream.send_all(HOLDS.pack(position))
                if master_start > retained_from and store.starting_over is None:
                    # the master's retention deleted segments: so does this log (not a copy being made:
                    # that is derived from its first position)
                    retained_from = master_start
                    await trio.to_thread.run_sync(store.follow_retention, master_start)
    finally:
        if splicer is not None:
            splicer.close()
            with trio.CancelScope(shield=True):  # before this node appends as master, or follows again
                await trio.to_thread.run_sync(store.discard_spliced)


async def _apply(store: Store, node: int, start: int, buffer: bytearray | None, length: int, position: int) -> int:
    """Apply one chunk (`buffer` None: spliced into the commitlog's file); the new position."""
    if not length:
        return position
    spliced = buffer is None
    if spliced:
        inline = length <= INLINE_APPLY_BYTES and store.applies_spliced_in_place(start, length)
        apply, chunk = store.apply_spliced, length
    else:
        inline = length <= INLINE_APPLY_BYTES and store.applies_in_place(buffer, length)
        apply, chunk = store.append_replicated, memoryview(buffer)[:length]
    try:
        return apply(start, chunk) if inline else await trio.to_thread.run_sync(apply, start, chunk)
    except StorageFull as exc:
        return await _apply_once_room(store, node, start, length, buffer, exc)


async def _apply_once_room(store: Store, node: int, start: int, length: int, buffer: bytearray | None,
                           full: StorageFull) -> int:
    """The disk is full: keep the stream (the master waits for this chunk's report, and the
    follower leaves the sync-state set after replica.lag.time.max.ms as any follower that does
    not keep up) and try again every FULL_RETRY_S, from where the log ends (a chunk applies in
    pieces that end at state records: the first ones may be written), until space is freed.
    Reconnecting instead re-sent the chunk and logged a line on both nodes every 20 ms."""
    log.error("cannot apply what master %d ships: %s; this node leaves the sync-state set until space is "
              "freed on its disk, and tries again every %g s", node, full, FULL_RETRY_S)
    while True:
        await trio.sleep(FULL_RETRY_S)
        at = max(store.log_end_position, start)  # below start: the chunk opens the next segment
        if at > start + length:
            raise ReplicationError(f"this log ends at {at}, past the chunk it was applying ({start}, "
                                   f"{length} bytes)")
        try:
            if buffer is None:  # spliced: the bytes lie in the file
                position = await trio.to_thread.run_sync(store.apply_spliced, at, start + length - at)
            else:
                position = await trio.to_thread.run_sync(store.append_replicated, at,
                                                          memoryview(buffer)[at - start:length])
        except StorageFull:
            continue
        log.warning("applying what master %d ships again, from commitlog position %d: space was freed", node, at)
        return position


async def _receive_chunks(stream: trio.abc.Stream, free: trio.MemoryReceiveChannel[bytearray],
                          arrived: trio.MemorySendChannel[tuple], splicer: _Splicer | None) -> None:
    sock = _socket(stream)
    lowat = _Lowat(sock) if sock is not None else None
    while True:
        start, hw_position, master_start, length = CHUNK.unpack(await receive_exactly(stream, CHUNK.size))
        if length and splicer is not None and await splicer.receive(sock, lowat, start, length):
            await arrived.send((start, hw_position, master_start, None, length))
            continue
        buffer = await free.receive() if length <= CHUNK_BYTES else bytearray(length)  # one entry above it
        view = memoryview(buffer)
        got = 0
        while sock is None and got < length:  # TLS: what the SSL object decrypted, copied in
            data = await stream.receive_some(length - got)
            if not data:
                raise StreamClosed("the master closed the replication stream")
            view[got:got + len(data)] = data
            got += len(data)
        while got < length:  # straight into the buffer: no intermediate bytes objects
            lowat.expect(length - got)
            n = await sock.recv_into(view[got:length])
            if not n:
                raise StreamClosed("the master closed the replication stream")
            got += n
        if lowat is not None:
            lowat.expect(0)  # the next chunk's header wakes it, however small the chunk
        await arrived.send((start, hw_position, master_start, buffer, length))


class _Lowat:
    """The follower socket's SO_RCVLOWAT, set for what a chunk still lacks (RECEIVE_LOWAT)."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.value = 1

    def expect(self, left: int) -> None:
        wanted = min(left, RECEIVE_LOWAT)
        if wanted < LOWAT_FROM:
            wanted = 1
        if wanted != self.value:
            self.sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVLOWAT, wanted)
            self.value = wanted


class _Splicer:
    """A pipe a follower's chunks go through from the socket into the commitlog's file, with
    splice(2): the socket's pages move into the pipe without a copy, and are copied once, into
    the page cache. recv into a buffer and then pwrite copied each byte twice; in a probe on
    loopback (sendfile to a socket, 4 MiB chunks) the receiving thread spent 0.35-0.45 CPU s/GB
    against 0.56-0.67 (docs/notes/benchmark-history.md). The bytes are written past the log's write position
    as they arrive; the chunk is then read, checked and derived from the mapping in order
    (Store.apply_spliced), and what was never applied is zeroed when the stream ends
    (Store.discard_spliced)."""

    def __init__(self, store: Store, read_fd: int, write_fd: int, size: int) -> None:
        self.store = store
        self.read_fd, self.write_fd, self.size = read_fd, write_fd, size

    @classmethod
    def open(cls, store: Store) -> _Splicer | None:
        if not SPLICE_AVAILABLE:  # not Linux: recv and pwrite
            return None
        return cls(store, *open_pipe(PIPE_BYTES))

    async def receive(self, sock: trio.socket.SocketType, lowat: _Lowat, start: int, length: int) -> bool:
        """Splice the chunk [start, start+length) into the commitlog's file; False, having read
        nothing, where it does not go there (Store.splice_target: the caller receives it into a
        buffer)."""
        target = self.store.splice_target(start, length)
        if target is None:
            return False
        fd, offset = target
        left = length
        while left:
            try:
                n = os.splice(sock.fileno(), self.write_fd, min(left, self.size),
                              flags=os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK)
            except BlockingIOError:  # the pipe is empty here: the socket has nothing yet
                lowat.expect(left)
                await trio.lowlevel.wait_readable(sock)
                continue
            if not n:
                raise StreamClosed("the master closed the replication stream")
            left -= n
            while n:  # the pipe holds just these bytes
                try:
                    written = os.splice(self.read_fd, fd, n, offset_dst=offset)
                except OSError as exc:
                    raise self.store.splice_write_error(exc) from exc
                offset += written
                n -= written
        lowat.expect(0)
        return True

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.write_fd)
