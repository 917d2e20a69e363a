"""Migrating a data dir written by Gregor 1 (files beside the commitlog) to state records.

Gregor 1 kept `topics.json` (format 1), `offsets.log` (format 1), `producer_ids` and
`producer_state.json` next to the commitlog. On the first start of this version their
contents become records of the state topic (store/state.py); once those are durable the
files are removed. A crash in between leaves the files, and the next start migrates them
again (the same keys and values: the result is the same). Read-only here: the Store writes.
"""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from store import state
from store.errors import StoreError
from store.topics import TopicMeta

FILES = ("topics.json", "offsets.log", "producer_ids", "producer_state.json")
_HEAD = struct.Struct(">II")
_NUMBERS = struct.Struct(">iqii")
_LEN16 = struct.Struct(">H")


@dataclass
class Legacy:
    topics: list[TopicMeta] = field(default_factory=list)
    records: list[state.Record] = field(default_factory=list)  # every file's contents as state records
    files: list[Path] = field(default_factory=list)


def read(root: Path) -> Legacy | None:
    """What Gregor 1 left in `root`, or None when it holds none of its files."""
    found = [root / name for name in FILES if (root / name).exists()]
    if not found:
        return None
    out = Legacy(files=found)
    topics = root / "topics.json"
    if topics.exists():
        doc = json.loads(topics.read_text())
        if doc.get("version") != 1:
            raise StoreError(f"{topics}: topics format {doc.get('version')} is not Gregor 1's (1); "
                             "this data dir was written by another version")
        for name, t in doc["topics"].items():
            meta = TopicMeta(name, t["partitions"], dict(t["configs"]), uuid.UUID(t["topic_id"]))
            out.topics.append(meta)
            out.records.append((state.topic_key(name), state.encode_topic(meta)))
    out.records.extend(_offsets(root / "offsets.log"))
    ids = root / "producer_ids"
    if ids.exists():
        try:
            out.records.append((state.PRODUCER_IDS, state.encode_i64(int(ids.read_text()))))
        except ValueError:
            pass  # a torn write of Gregor 1: its ids were never handed out
    snapshot = root / "producer_state.json"
    if snapshot.exists():
        out.records.append((state.PRODUCER_SNAPSHOT, snapshot.read_bytes()))
    return out


def _offsets(path: Path) -> list[state.Record]:
    """offsets.log format 1: length u32 | crc u32 | kind u8 (1 commit, 2 delete group) |
    u16 group | u16 topic | partition i32 | offset i64 | epoch i32 | metadata i32 len; a torn
    or corrupt tail ends it, as Gregor 1's own replay did."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    groups: dict[str, dict[tuple[str, int], bytes]] = {}
    pos = 0
    while pos + _HEAD.size <= len(data):
        length, crc = _HEAD.unpack_from(data, pos)
        payload = data[pos + _HEAD.size:pos + _HEAD.size + length]
        if length == 0 or len(payload) < length or crc32c.crc32c(payload) != crc:
            break
        kind = payload[0]
        (glen,) = _LEN16.unpack_from(payload, 1)
        group = payload[3:3 + glen].decode()
        p = 3 + glen
        (tlen,) = _LEN16.unpack_from(payload, p)
        topic = payload[p + 2:p + 2 + tlen].decode()
        p += 2 + tlen
        partition, offset, epoch, mlen = _NUMBERS.unpack_from(payload, p)
        metadata = None if mlen < 0 else payload[p + _NUMBERS.size:p + _NUMBERS.size + mlen].decode()
        if kind == 1:
            groups.setdefault(group, {})[(topic, partition)] = state.encode_offset(offset, metadata, epoch)
        elif kind == 2:
            groups.pop(group, None)
        pos += _HEAD.size + length
    return [(state.offset_key(g, t, p), value) for g, parts in groups.items() for (t, p), value in parts.items()]
