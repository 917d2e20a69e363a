"""The admin HTTP API (`--admin-port`): lookups by key and by message id, /metrics, and the web
console (broker/console/: its pages, JSON endpoints and actions, docs/extensions.md).

A small ASGI app served by hypercorn's trio worker inside the broker's event
loop, so handlers read the store exactly as Kafka handlers do. Endpoints:

    GET /metrics                                   Prometheus text format
    GET /v1/messages?topic=T&key=K[&from=MS][&to=MS]   newest first, at most 32 (MetaQ §7.4.3);
                                                   `key_index_behind_bytes` when the key index lags
    GET /v1/messages?msg_id=ID                     one message (MetaQ §7.4.1), 404 when unknown

`key_b64=` may replace `key=` for binary keys. Answers are JSON; values that are
not UTF-8 text are base64 (see record_json). These endpoints never write; the
console's actions go through the Kafka handlers (broker/console/actions.py). With
`admin.token` set, every request but the console's static pages must carry
`Authorization: Bearer TOKEN` (else 401); the token is compared in constant time
and never logged.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import hypercorn.config
import hypercorn.trio
import trio

from protocol import record_text
from broker.console.routes import PAGE_HEADERS, Console, failure, read_json, same_origin, static_file
from broker.net.metrics import CONTENT_TYPE
from broker.net.state_metrics import StateCollector
from broker.views.definition import view_of
from store import StoredRecord, UnknownTopic

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger("gregor.admin")
MAX_HITS = 32
FOREVER_MS = 2**63 - 1


def record_json(record: StoredRecord) -> dict[str, Any]:
    """One message as the admin API and `gregor query` print it (protocol/record_text.py, plus its id)."""
    shown = record_text.record_json(record.topic, record.partition, record.offset, record.timestamp,
                                    record.key, record.value, record.headers)
    shown["msg_id"] = record.msg_id
    return shown


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def lookup(broker: Broker, query: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The messages a /v1/messages query asks for."""
    def one(name: str) -> str | None:
        values = query.get(name)
        return values[-1] if values else None

    msg_id = one("msg_id")
    if msg_id is not None:
        record = broker.store.lookup_message_id(msg_id)
        if record is None:
            raise HttpError(404, f"no message with id {msg_id!r} on this broker")
        return [record_json(record)]
    topic = one("topic")
    if topic is None or (one("key") is None and one("key_b64") is None):
        raise HttpError(400, "give msg_id=ID, or topic=T with key=K (or key_b64=...)")
    key = one("key").encode() if one("key") is not None else base64.b64decode(one("key_b64"))
    try:
        begin = int(one("from") or 0)
        end = int(one("to") or FOREVER_MS)
    except ValueError:
        raise HttpError(400, "from and to are epoch milliseconds") from None
    meta = broker.topic(topic)
    if meta is None:
        raise HttpError(404, f"unknown topic {topic!r}")
    if view_of(meta) is not None or meta.configs.get("key.index.enable", "true").lower() != "true":
        raise HttpError(400, f"topic {topic!r} does not index keys; it was created with key.index.enable=false")
    try:
        hits = broker.store.lookup_key(topic, key, begin, end, MAX_HITS)
    except UnknownTopic:
        raise HttpError(404, f"unknown topic {topic!r}") from None
    return [record_json(r) for r in hits]


def bearer_token(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The token of an `Authorization: Bearer TOKEN` header (ASGI header names are lower case)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                return token.strip()
    return None


async def _send(send, status: int, body: bytes, content_type: str,
                headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def make_app(broker: Broker, console: Console):
    required = broker.config["admin.token"].encode()

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        client_ip = (scope.get("client") or ("?",))[0]
        page = static_file(path) if method == "GET" else None
        if page is not None:  # the console's pages hold no data: they ask for the token themselves
            await _send(send, 200, page[0], page[1], PAGE_HEADERS)
            return
        if required:
            given = bearer_token(scope["headers"])
            if given is None or not hmac.compare_digest(given, required):
                log.info("admin API: %s %s from %s refused: %s bearer token", method, path, client_ip,
                         "no" if given is None else "wrong")
                await _send(send, 401, b'{"error": "this admin API needs Authorization: Bearer <admin.token>"}',
                            "application/json", ((b"www-authenticate", b'Bearer realm="gregor"'),))
                return
        query = {k: v[-1] for k, v in parse_qs(scope["query_string"].decode(), keep_blank_values=True).items()}
        raw_path = scope.get("raw_path") or path.encode()
        try:
            if method == "POST":
                if not same_origin(scope["headers"]):
                    log.info("admin API: POST %s from %s refused: another site's page (Origin)", path, client_ip)
                    answer = 403, {"error": "a POST must come from the console's own page (Origin)"}
                else:
                    answer = await console.post(raw_path, await read_json(receive), client_ip)
            elif method != "GET":
                answer = 405, {"error": "only GET and POST"}
            elif path == "/metrics":
                await _send(send, 200, broker.metrics.render(), CONTENT_TYPE)
                return
            elif path == "/v1/messages":
                # a worker thread: a key lookup waits up to a second for the key dispatcher
                body = {"messages": await trio.to_thread.run_sync(lookup, broker, parse_qs(scope["query_string"].decode(),
                                                                                           keep_blank_values=True))}
                behind = broker.store.key_index_behind()
                if behind:  # keys are indexed off the write path; say what the answer may miss
                    body["key_index_behind_bytes"] = behind
                answer = 200, body
            else:
                answer = await console.get(raw_path, query)
            if answer is None:
                answer = 404, {"error": "not found"}
        except HttpError as exc:
            answer = exc.status, {"error": str(exc)}
        except Exception as exc:
            answer = failure(exc)
            if answer is None:
                log.exception("admin API: %s %s %r failed", method, path, scope["query_string"])
                answer = 500, {"error": "internal error"}
        await _send(send, answer[0], json.dumps(answer[1]).encode(), "application/json")

    return app


async def serve_admin(broker: Broker, sock: socket.socket, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve the admin API on the bound, listening `sock` until cancelled; task_status gets its
    "host:port"."""
    broker.metrics.watch(StateCollector(broker))  # /metrics reports the broker's state too
    config = hypercorn.config.Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.errorlog = log
    console = Console(broker)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(console.sample_forever)
        await nursery.start(hypercorn.trio.serve, make_app(broker, console), config)
        host, port = sock.getsockname()[:2]
        task_status.started(f"{host}:{port}")
