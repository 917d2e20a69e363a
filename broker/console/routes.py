"""The console's HTTP routes on the admin port (broker/net/admin_http.py hands them every request
it does not serve itself): the static pages, the JSON endpoints of docs/extensions.md, the POSTs
of actions.py with their Origin check, and the sampler that keeps history.py's rates and lags."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import trio

from broker.console import actions, browse, pages
from broker.console.history import INTERVAL_S, LagHistory, Rates

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger("gregor.console")
STATIC = Path(__file__).parent / "static"
FILES = {"/": ("index.html", "text/html; charset=utf-8"),
         "/console.js": ("console.js", "text/javascript; charset=utf-8"),
         "/console.css": ("console.css", "text/css; charset=utf-8")}
# the pages load nothing from elsewhere and may not be framed (clickjacking)
PAGE_HEADERS = ((b"content-security-policy",
                 b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"),
                (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                (b"cache-control", b"no-cache"))
MAX_BODY = 64 * 1024
Answer = tuple[int, dict[str, Any]]


def static_file(path: str) -> tuple[bytes, str] | None:
    """(body, content type) of a console page, or None when `path` is not one."""
    found = FILES.get(path)
    if found is None:
        return None
    return (STATIC / found[0]).read_bytes(), found[1]


def segments(raw_path: bytes) -> list[str]:
    """The path's segments, each percent-decoded on its own: a group name may hold a '/' (%2F)."""
    return [unquote(s) for s in raw_path.decode("latin-1").split("/")[1:]]


def same_origin(headers: list[tuple[bytes, bytes]]) -> bool:
    """A browser's POST must come from the console's own page: its Origin names the Host it was sent
    to. Without an Origin header the caller is not a browser (curl, a script): no cross-site risk."""
    found = dict(headers)
    origin = found.get(b"origin")
    if origin is None:
        return True
    return urlsplit(origin.decode("latin-1")).netloc == found.get(b"host", b"").decode("latin-1")


class Console:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.rates = Rates()
        self.lags = LagHistory()

    # ---- the sampler ----------------------------------------------------------------------------------
    def _readings(self) -> tuple[dict[str, float], dict[str, dict[tuple[str, int], int]]]:
        store = self.broker.store
        messages = 0
        for meta in store.topics().values():
            if not meta.configs.get("view.source"):
                for p in range(meta.partitions):
                    try:
                        messages += store.high_watermark(meta.name, p)
                    except pages.PAGE_ERRORS:
                        pass
        totals = self.broker.metrics.totals()
        readings = {"messages_in": float(messages), "bytes_in": totals["bytes_in"], "bytes_out": totals["bytes_out"],
                    "produce_requests": totals.get("Produce_requests", 0.0),
                    "fetch_requests": totals.get("Fetch_requests", 0.0)}
        return readings, pages.group_lags(self.broker)

    async def sample_forever(self) -> None:
        """On the loop: the readings are in-memory high watermarks, counters and the coordinator's groups."""
        while True:
            readings, lags = self._readings()
            now = time.time()
            self.rates.add(now, readings)
            self.lags.add(now, lags)
            await trio.sleep(INTERVAL_S)

    # ---- requests -----------------------------------------------------------------------------------
    async def get(self, raw_path: bytes, query: dict[str, str]) -> Answer | None:
        parts = segments(raw_path)
        broker = self.broker
        match parts:
            case ["v1", "overview"]:
                topics = await trio.to_thread.run_sync(pages.topic_summaries, broker)
                return 200, pages.overview(broker, self.rates, topics)
            case ["v1", "topics", name]:
                partitions = await trio.to_thread.run_sync(pages.topic_partitions, broker, name)
                return 200, pages.topic(broker, name, partitions)
            case ["v1", "topics", name, "messages"]:
                # a worker thread: a key lookup waits up to a second for the key dispatcher
                return 200, await trio.to_thread.run_sync(browse.browse, broker, name, query)
            case ["v1", "groups"]:
                return 200, {"groups": pages.group_summaries(broker)}
            case ["v1", "groups", name]:
                return 200, pages.group(broker, name, self.lags)
        return None

    async def post(self, raw_path: bytes, body: dict[str, Any], client_ip: str) -> Answer | None:
        parts = segments(raw_path)
        broker = self.broker
        match parts:
            case ["v1", "groups", name, "reset-offsets"]:
                return 200, await actions.reset_offsets(
                    broker, client_ip, name, str(body.get("to", "")), body.get("datetime"),
                    body.get("topic") or None, bool(body.get("dry_run")))
            case ["v1", "topics", name, "delete"]:
                return 200, await actions.delete_topic(broker, client_ip, name)
            case ["v1", "views"]:
                tags = body.get("tags") or []
                if isinstance(tags, str):
                    tags = [t.strip() for t in tags.split(",")]
                return 201, await actions.create_view(broker, client_ip, str(body.get("name", "")),
                                                      str(body.get("source", "")), [str(t) for t in tags if t])
        return None


def failure(exc: Exception) -> Answer | None:
    """The HTTP answer of a refusal the console raises; None for anything else (a bug: 500)."""
    if isinstance(exc, pages.NotFound):
        return 404, {"error": str(exc)}
    if isinstance(exc, browse.BadQuery):
        return 400, {"error": str(exc)}
    if isinstance(exc, actions.Refused):
        return exc.status, {"error": str(exc)}
    return None


async def read_json(receive) -> dict[str, Any]:
    """A POST's JSON object (at most MAX_BODY bytes; an empty body is {})."""
    data = b""
    while True:
        message = await receive()
        data += message.get("body", b"")
        if len(data) > MAX_BODY:
            raise actions.Refused(413, f"a request body is at most {MAX_BODY} bytes")
        if not message.get("more_body"):
            break
    if not data.strip():
        return {}
    try:
        found = json.loads(data)
    except ValueError:
        raise actions.Refused(400, "the body is not JSON") from None
    if not isinstance(found, dict):
        raise actions.Refused(400, "the body is a JSON object")
    return found
