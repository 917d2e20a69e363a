"""One client connection: read frames, answer each request in order.

Kafka processes one request per connection at a time (it mutes the channel),
so requests run sequentially here too; other connections run concurrently.
Malformed frames close only this connection. A bug in a handler is logged and
closes this connection; the broker keeps serving everyone else.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from broker.broker import Broker
from broker.handlers import dispatch
from broker.handlers.sasl import authenticate
from broker.net.answers import CloseAfter, CloseUnanswered, Deferred
from broker.net.listeners import Listener, SaslSession, ssl_principal
from broker.net.peer import listener as peer_listener
from broker.net.peer import peer_host, sasl_session, tls_subject
from broker.net.pipes import AVAILABLE as SPLICE_AVAILABLE
from broker.net.receive_timer import ReceiveTimer
from broker.net.socket_io import SocketIO
from broker.net.splice import EOF_ as EOF
from broker.net.splice import ProduceSplicer
from broker.security.sasl import AuthenticationFailed
from protocol.api_versions import API_VERSIONS_KEY
from protocol.codec import (
    MalformedRequest,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)
from protocol.framing import FrameDecoder, FrameError
from store import PipedBatch

log = logging.getLogger("gregor.connection")
# Reads of up to 64 KiB for small frames: a receive into a new bytes object of 256 KiB (above
# malloc's mmap threshold) cost 20 us more than one of 64 KiB; a frame larger than that is received
# into its own buffer (protocol/framing.py's whole frames).
READ_SIZE = 64 * 1024
MAX_RESPONSES_IN_FLIGHT = 64  # answers queued behind a group commit before reading pauses
# Requests whose handlers never wait (for a client, a timer or a group commit): an answer ready
# while one of these is already buffered behind it is held and leaves with the next one in one
# writev. librdkafka pipelines one ListOffsets per partition as it starts (10,000 of them for
# 10,000 partitions) and up to five produce requests; a write per answer cost ~9 of ListOffsets'
# 49 us. A request that may wait (a long-poll Fetch, JoinGroup) never holds an answer back.
BATCHED_APIS = frozenset({0, 2})  # Produce, ListOffsets
MAX_HELD = 64


async def serve_connection(broker: Broker, listener: Listener, stream: trio.SocketStream) -> None:
    """One client connection; a TLS listener's takes the context in force as it is accepted."""
    tls = broker.listener_tls.get(listener.name)
    peer = _peer(stream)
    ip = peer.rsplit(":", 1)[0]
    refusal = broker.connections.admit(ip)
    if refusal:
        log.warning("refusing connection from %s: %s", peer, refusal)
        await stream.aclose()
        return
    try:
        if tls is not None:
            secure = trio.SSLStream(stream, tls, server_side=True)
            try:
                with trio.fail_after(broker.config["request.timeout.ms"] / 1000):
                    await secure.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError, trio.ClosedResourceError) as exc:
                # a plaintext client, a failed certificate check, a truncated handshake: this connection
                # only (a refused certificate never keeps a good one out)
                cause = exc.__cause__ or exc
                log.info("closing %s: TLS handshake failed (%s)", peer, cause.__class__.__name__ + (f": {cause}" if str(cause) else ""))
                await stream.aclose()
                return
            subject = ssl_principal(secure.getpeercert())
            log.info("TLS from %s: principal User:%s", peer, subject)
            if not listener.sasl:
                tls_subject.set(None if subject == "ANONYMOUS" else subject)
            await serve_stream(broker, listener, secure, peer)
        else:
            await serve_stream(broker, listener, stream, peer)
    finally:
        broker.connections.release(ip)


async def serve_stream(broker: Broker, listener: Listener, stream: trio.abc.Stream, peer: str) -> None:
    """The requests of one established connection: a socket's, a TLS session's, or the test kit's
    in-memory stream (tests/kit/inprocess.py)."""
    peer_host.set("/" + peer.rsplit(":", 1)[0])
    peer_listener.set(listener)
    if listener.sasl:
        sasl_session.set(SaslSession(broker.config.sasl_mechanisms(), broker.config["connections.max.reauth.ms"]))
    responses, to_send = trio.open_memory_channel(MAX_RESPONSES_IN_FLIGHT)
    queued = _Queued()
    io = SocketIO(stream.socket) if isinstance(stream, trio.SocketStream) else None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_in_order, stream, io, to_send, nursery.cancel_scope, peer, queued)
            await _read_requests(broker, stream, io, peer, responses, queued)
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


class _Queued:
    """How many answers the reader has handed to the sender task and it has not written yet."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


async def _read_requests(broker: Broker, stream: trio.abc.Stream, io: SocketIO | None, peer: str,
                         responses: trio.MemorySendChannel, queued: _Queued) -> None:
    """Read and handle requests one at a time, in order; queue their answers for the sender,
    or, when an answer is ready and none waits before it, write it here: the sender is then
    idle, so the order holds, and the answer skips a channel hop and a task switch (a tenth of
    a small produce request's time on the event loop). Closing the channel lets the sender
    finish what is queued, then the connection closes. A wait for the next bytes ends after
    connections.max.idle.ms, or request.timeout.ms within a frame (broker/net/receive_timer.py).
    A plain TCP connection reads and writes through `io` (broker/net/socket_io.py), others
    through their stream."""
    decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
    idle_s = broker.config["connections.max.idle.ms"] / 1000
    partial_s = broker.config["request.timeout.ms"] / 1000
    timer = ReceiveTimer(idle_s, partial_s)
    splice_min = broker.config["produce.splice.min.bytes"]
    splicer = None  # large produce batches into a pipe (broker/net/splice.py): plain TCP only
    if io is not None and splice_min > 0 and SPLICE_AVAILABLE:
        splicer = ProduceSplicer(io.fd, splice_min, decoder.max_frame_bytes, broker.metrics)
    try:
        await _read_loop(broker, stream, io, peer, responses, queued, decoder, timer, (idle_s, partial_s), splicer)
    finally:
        if splicer is not None:
            splicer.close()


async def _read_loop(broker: Broker, stream: trio.abc.Stream, io: SocketIO | None, peer: str,
                     responses: trio.MemorySendChannel, queued: _Queued, decoder: FrameDecoder,
                     timer: ReceiveTimer, limits: tuple[float, float], splicer: ProduceSplicer | None) -> None:
    idle_s, partial_s = limits
    held: list = []  # ready answers that leave with the next one (BATCHED_APIS)
    async with responses, trio.open_nursery() as nursery:
        nursery.start_soon(timer.watch)
        with timer.scope:
            try:
                while True:
                    frame = decoder.next_frame()
                    piped = None
                    if frame is None and splicer is not None and splicer.active and not decoder.buffered:
                        if held:  # the next request may take a while to arrive
                            await _send_held(stream, io, held)
                        timer.limit = idle_s
                        session = sasl_session.get()
                        got = None if session is not None and session.raw_tokens else \
                            await splicer.receive(timer, partial_s)
                        if got is EOF:
                            break
                        if got.__class__ is tuple:
                            frame, piped, size = got
                        else:
                            frame = got  # a whole frame, or None: read it as before
                    elif frame is not None and splicer is not None and not splicer.active:
                        splicer.consider(frame)
                    if frame is None:
                        if held:
                            await _send_held(stream, io, held)
                        timer.limit = partial_s if decoder.partial else idle_s
                        timer.waiting_since = trio.current_time()
                        whole = decoder.whole_frame_buffer() if io is not None else None
                        if whole is not None:  # the rest of a large frame, received where it is handed out
                            with whole:
                                n = await io.receive_into(whole)
                            timer.waiting_since = None
                            if not n:
                                break
                            decoder.received(n)
                            continue
                        if splicer is not None and splicer.active:  # read no further than this frame
                            want = min(splicer.next_size or decoder.bytes_wanted(), READ_SIZE)
                        else:
                            want = max(READ_SIZE, min(decoder.bytes_wanted(), 1 << 24))
                        data = await (stream.receive_some(want) if io is None else io.receive_some(want))
                        timer.waiting_since = None
                        if not data:
                            break
                        decoder.feed(data)
                        continue
                    if piped is None:
                        answer = await _answer(broker, frame, peer)
                    else:
                        try:
                            answer = await _answer(broker, frame, peer, piped, size)
                        finally:
                            piped.drop()  # what the handler left in the pipe (a refused batch)
                    if answer is not None:
                        if answer[1] is None and not queued.count:
                            if decoder.next_api_key() in BATCHED_APIS and len(held) < MAX_HELD:
                                held.append(answer[0])
                                continue
                            if held:
                                held.append(answer[0])
                                await _send_held(stream, io, held)
                            else:
                                await _send(stream, io, answer[0])
                            continue
                        if held:  # they go before anything queued for the sender
                            await _send_held(stream, io, held)
                        queued.count += 1
                        if answer[1] is CLOSE_AFTER:  # the sender writes it, then the connection closes
                            await responses.send((answer[0], None))
                            log.info("closing %s: SASL authentication failed", peer)
                            break
                        await responses.send(answer)
            except (FrameError, _CloseConnection) as exc:
                if held:  # the answers before the refused request
                    with trio.move_on_after(partial_s):
                        await _send_held(stream, io, held)
                log.info("closing %s: %s", peer, exc)
            except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
                pass
            except Exception:
                # Whatever happens on one connection must never reach the listener's nursery.
                log.exception("connection %s failed", peer)
        if timer.expired:
            log.info("closing %s: %s", peer, "partial request timed out" if decoder.partial else "idle")
        nursery.cancel_scope.cancel()


async def _send_in_order(stream: trio.abc.Stream, io: SocketIO | None, to_send: trio.MemoryReceiveChannel,
                         reader_scope: trio.CancelScope, peer: str, queued: _Queued) -> None:
    """Answers leave in request order; one waiting for its group commit holds back the ones
    behind it (Kafka clients require the order), not the reading of further requests."""
    try:
        async with to_send:
            async for response, durable in to_send:
                if durable is not None:
                    response = await durable()
                await _send(stream, io, response)
                queued.count -= 1
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        reader_scope.cancel()
    except Exception:
        log.exception("sending to %s failed", peer)
        reader_scope.cancel()


async def _send(stream: trio.abc.Stream, io: SocketIO | None, response: bytes | list) -> None:
    if io is not None:
        await io.send(response)
    elif isinstance(response, list):  # no zero-copy through TLS (or into memory): one write
        await stream.send_all(b"".join(response))
    else:
        await stream.send_all(response)


async def _send_held(stream: trio.abc.Stream, io: SocketIO | None, held: list) -> None:
    """Write the held answers (whole frames, in order) in one go, and forget them."""
    buffers = []
    for answer in held:
        if isinstance(answer, list):
            buffers.extend(answer)
        else:
            buffers.append(answer)
    held.clear()
    await _send(stream, io, buffers)


class _CloseConnection(Exception):
    pass


CLOSE_AFTER = object()  # an answer after which the connection closes (a failed authentication)


async def _answer(broker: Broker, frame: bytes | bytearray, peer: str, piped: PipedBatch | None = None,
                  frame_size: int = 0) -> tuple[bytes, Any] | None:
    """(response bytes, awaitable to finish first or None), or None when no answer is due.
    With `piped`, `frame` is a one-partition Produce whose records stand in for the batch in
    the pipe (broker/net/splice.py), and `frame_size` is the size of the frame received."""
    session = sasl_session.get()
    if session is not None and session.raw_tokens:  # after SaslHandshake v0: a bare SASL token
        return await _raw_token(broker, session, bytes(frame), peer), None  # a large frame is a bytearray
    try:
        request = decode_request(frame)
    except MalformedRequest as exc:
        raise _CloseConnection(str(exc)) from None
    if session is not None:
        refusal = session.refusal(request.header.api_key, trio.current_time() * 1000)
        if refusal:  # Kafka closes the connection, answering nothing
            raise _CloseConnection(refusal)
    received = len(frame)
    if piped is not None and request.__class__ is Request:
        request = _with_piped(request, piped)
        received = frame_size
    if isinstance(request, UnsupportedRequest):
        if request.header.api_key == API_VERSIONS_KEY:
            return unsupported_api_versions_response(request.header), None
        raise _CloseConnection(f"unsupported version {request.header.api_version} of api {request.header.api_key}")
    try:
        body = await dispatch(broker, request)
        if isinstance(body, CloseAfter):  # sent, then this connection closes
            if body.body is None:
                raise _CloseConnection("oversized SASL token")
            return encode_response(request.header, body.body), CLOSE_AFTER
        if body is None or isinstance(body, CloseUnanswered):  # an acks=0 produce: nothing to answer
            broker.metrics.request(request.spec.name, received, 0)
            if body is None:
                return None
            raise _CloseConnection(str(body))  # after the answers queued before it
        if isinstance(body, Deferred):
            return None, _after_flush(broker, request, body, received)
        response = encode_response(request.header, body)
        # a list's first buffer starts with the frame size: no second pass over the batches
        size = int.from_bytes(response[0][:4], "big") + 4 if isinstance(response, list) else len(response)
        broker.metrics.request(request.spec.name, received, size)
        return response, None
    except _CloseConnection:
        raise
    except MalformedRequest as exc:  # a body a handler finds Kafka cannot parse (its request classes' checks)
        raise _CloseConnection(str(exc)) from None
    except Exception:
        log.exception("handler bug on %s v%d from %s (client %r)", request.spec.name,
                      request.header.api_version, peer, request.header.client_id)
        raise _CloseConnection("internal error") from None


def _with_piped(request: Request, piped: PipedBatch) -> Request:
    """The request with its one partition's records replaced by the batch in the pipe."""
    body = request.body
    topic = body.topic_data[0]
    partition = topic.partition_data[0]._replace(records=piped)
    return request._replace(body=body._replace(topic_data=[topic._replace(partition_data=[partition])]))


async def _raw_token(broker: Broker, session, frame: bytes, peer: str) -> bytes:
    """A SASL token framed by its length alone (SaslHandshake v0, KIP-43); a failed one closes
    the connection with no answer, as Kafka does before KIP-152."""
    try:
        token = await authenticate(broker, session, frame)
    except AuthenticationFailed as exc:
        raise _CloseConnection(f"authentication failed: {exc}") from None
    return len(token).to_bytes(4, "big") + token


def _after_flush(broker: Broker, request, pending: Deferred, frame_size: int):
    """The sender's wait for a deferred answer (a produce's group commit or replication); the
    answer is encoded after it, since a failed fsync changes it (KAFKA_STORAGE_ERROR, not NONE)."""

    async def durable() -> bytes:
        await pending.wait()
        response = encode_response(request.header, pending.body)
        broker.metrics.request(request.spec.name, frame_size, len(response))
        return response

    return durable


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
