"""The console's message browser (Kafka UI's message page, RocketMQ dashboard's message query): a
topic's messages newest first, from a time, from an offset, by key (the key index), by message id,
filtered by tag (the consume queue's tag hashes, as a view filters); each with its key and value as
text or hex, cut to SHOWN_BYTES. Reads the store only; routes.py calls it in a worker thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from broker.cli.format import UsageError, parse_time_ms
from broker.console.pages import NotFound
from broker.views.definition import view_of
from store import TAG_HEADER, StoredRecord, TopicMeta, tag_hash

if TYPE_CHECKING:
    from broker.broker import Broker

DEFAULT_LIMIT = 50
MAX_LIMIT = 500  # messages per request, whatever is asked
SHOWN_BYTES = 2048  # of a key, value or header: the rest is counted, not sent
TAG_SCAN = 1_000_000  # consume-queue entries looked at per partition for a tag
FOREVER_MS = 2**63 - 1


class BadQuery(Exception):
    """A browser query that cannot be answered as asked (HTTP 400)."""


def shown(data: bytes | None) -> dict[str, Any] | None:
    """Text when the bytes are UTF-8 without control characters (tabs and newlines allowed), else hex."""
    if data is None:
        return None
    size = len(data)
    try:
        text = bytes(data).decode()
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\t\n\r" for c in text[:SHOWN_BYTES]):
        return {"text": text[:SHOWN_BYTES], "size": size, "truncated": len(text) > SHOWN_BYTES}
    return {"hex": bytes(data[:SHOWN_BYTES]).hex(), "size": size, "truncated": size > SHOWN_BYTES}


def message_json(record: StoredRecord) -> dict[str, Any]:
    return {"partition": record.partition, "offset": record.offset, "timestamp": record.timestamp,
            "msg_id": record.msg_id, "key": shown(record.key), "value": shown(record.value),
            "headers": [{"key": k, "value": shown(v)} for k, v in record.headers]}


def browse(broker: Broker, topic: str, query: dict[str, str]) -> dict[str, Any]:
    meta = broker.topic(topic)
    if meta is None:
        raise NotFound(f"unknown topic {topic!r}")
    try:
        asked = int(query.get("limit") or DEFAULT_LIMIT)
    except ValueError:
        raise BadQuery("limit is a number of messages") from None
    if asked < 1:
        raise BadQuery("limit is at least 1")
    limit = min(asked, MAX_LIMIT)
    view = view_of(meta)
    source = broker.topic(view.source) if view else meta
    if source is None:
        raise NotFound(f"the source topic of view {topic!r} is gone")
    partitions = _partitions(meta, query.get("partition"))
    tags = _tags(source, view.tags if view else (), query.get("tag"))
    body: dict[str, Any] = {"limit": limit, "capped": asked > MAX_LIMIT}
    if query.get("msg_id"):
        record = broker.store.lookup_message_id(query["msg_id"])
        if record is None or record.topic != source.name or (tags is not None and tag_hash(_tag(source, record))
                                                                not in tags):
            raise NotFound(f"no message with id {query['msg_id']!r} in {topic!r} on this broker")
        found = [record]
    elif "key" in query:
        found = _by_key(broker, source, query["key"].encode(), partitions, tags, limit)
        behind = broker.store.key_index_behind()
        if behind:
            body["key_index_behind_bytes"] = behind
    elif query.get("from"):
        try:
            since = parse_time_ms(query["from"])
        except UsageError as exc:
            raise BadQuery(str(exc)) from None
        found = []
        for p in partitions:
            offset, _ = broker.store.offset_for_timestamp(source.name, p, since)
            if offset >= 0:
                found += _forward(broker, source.name, p, offset, tags, limit)
        found = sorted(found, key=lambda r: (r.timestamp, r.partition, r.offset))[:limit]
    elif query.get("offset"):
        if query.get("partition") is None:
            raise BadQuery("offset= needs partition=")
        try:
            offset = int(query["offset"])
        except ValueError:
            raise BadQuery("offset is a number") from None
        found = _forward(broker, source.name, partitions[0], offset, tags, limit)
    else:  # the newest of each partition, newest first
        found = []
        for p in partitions:
            found += _newest(broker, source.name, p, tags, limit)
        found = sorted(found, key=lambda r: (r.timestamp, r.offset), reverse=True)[:limit]
    body["messages"] = [message_json(r) for r in found]
    return body


def _partitions(meta: TopicMeta, asked: str | None) -> list[int]:
    if asked is None or asked == "":
        return list(range(meta.partitions))
    try:
        p = int(asked)
    except ValueError:
        raise BadQuery("partition is a number") from None
    if not 0 <= p < meta.partitions:
        raise BadQuery(f"{meta.name!r} has partitions 0 to {meta.partitions - 1}")
    return [p]


def _tags(source: TopicMeta, view_tags: tuple[bytes, ...], asked: str | None) -> set[int] | None:
    """The tag hashes a record must have (None: any), from the view's tags and the query's tag."""
    wanted = set(view_tags)
    if asked:
        if not source.configs.get(TAG_HEADER):
            raise BadQuery(f"topic {source.name!r} has no {TAG_HEADER} config: its records carry no tags")
        wanted = {asked.encode()} if not wanted or asked.encode() in wanted else set()
        if not wanted:
            return set()  # a tag the view does not let through: nothing
    return {tag_hash(t) for t in wanted} if wanted else None


def _tag(source: TopicMeta, record: StoredRecord) -> bytes | None:
    header = source.configs.get(TAG_HEADER)
    return next((v for k, v in record.headers if k == header), None)


def _matching(broker: Broker, topic: str, partition: int, start: int, stop: int, tags: set[int]) -> np.ndarray:
    hashes = broker.store.tag_hashes(topic, partition, start, stop)
    return np.flatnonzero(np.isin(hashes, np.fromiter(tags, dtype=np.int64))) + start


def _forward(broker: Broker, topic: str, partition: int, offset: int, tags: set[int] | None,
             limit: int) -> list[StoredRecord]:
    store = broker.store
    offset = max(offset, store.log_start_offset(topic, partition))
    end = store.high_watermark(topic, partition)
    if tags is None:
        return store.records_from(topic, partition, offset, limit) if offset < end else []
    hits = _matching(broker, topic, partition, offset, min(end, offset + TAG_SCAN), tags)[:limit]
    return _at(broker, topic, partition, hits)


def _newest(broker: Broker, topic: str, partition: int, tags: set[int] | None, limit: int) -> list[StoredRecord]:
    store = broker.store
    start, end = store.log_start_offset(topic, partition), store.high_watermark(topic, partition)
    if tags is None:
        return store.records_from(topic, partition, max(start, end - limit), limit)
    hits = _matching(broker, topic, partition, max(start, end - TAG_SCAN), end, tags)[-limit:]
    return _at(broker, topic, partition, hits)


def _at(broker: Broker, topic: str, partition: int, offsets: np.ndarray) -> list[StoredRecord]:
    out = []
    for offset in offsets.tolist():
        got = broker.store.records_from(topic, partition, offset, 1)
        if got and got[0].offset == offset:
            out.append(got[0])
    return out


def _by_key(broker: Broker, source: TopicMeta, key: bytes, partitions: list[int], tags: set[int] | None,
            limit: int) -> list[StoredRecord]:
    if source.configs.get("key.index.enable", "true").lower() != "true":
        raise BadQuery(f"topic {source.name!r} does not index keys; it was created with key.index.enable=false")
    hits = broker.store.lookup_key(source.name, key, 0, FOREVER_MS, limit)
    return [r for r in hits if r.partition in partitions
            and (tags is None or tag_hash(_tag(source, r)) in tags)]
