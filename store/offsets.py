"""Consumer-group committed offsets, durable across crashes.

Owns `<data_dir>/offsets.log` (format version 1): an append-only file of CRC'd records,
fsynced on every commit call, replayed on open (a torn or corrupt tail is truncated) and
compacted by atomic replacement. Never interprets group membership: that is the broker's
group coordinator.

Record, big-endian: length u32 (of the payload) | crc u32 (CRC-32C of the payload) | payload:
  kind u8 (1 = commit, 2 = delete group) | group_len u16 | group | topic_len u16 | topic |
  partition i32 | offset i64 | leader_epoch i32 | metadata_len i32 (-1 = null) | metadata
A delete-group record has an empty topic and zero numbers.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

import crc32c

from store.atomic_file import replace

RECORD_HEAD = struct.Struct(">II")
NUMBERS = struct.Struct(">iqii")
LEN16 = struct.Struct(">H")
COMMIT, DELETE_GROUP = 1, 2

Committed = tuple[int, str | None, int]  # offset, metadata, leader epoch


def _encode(kind: int, group: str, topic: str, partition: int, offset: int, leader_epoch: int,
            metadata: str | None) -> bytes:
    g, t = group.encode(), topic.encode()
    m = b"" if metadata is None else metadata.encode()
    payload = b"".join((bytes([kind]), LEN16.pack(len(g)), g, LEN16.pack(len(t)), t,
                        NUMBERS.pack(partition, offset, leader_epoch, -1 if metadata is None else len(m)),
                        m))
    return RECORD_HEAD.pack(len(payload), crc32c.crc32c(payload)) + payload


def _decode(payload: bytes) -> tuple[int, str, str, int, int, int, str | None]:
    kind = payload[0]
    (glen,) = LEN16.unpack_from(payload, 1)
    group = payload[3:3 + glen].decode()
    p = 3 + glen
    (tlen,) = LEN16.unpack_from(payload, p)
    topic = payload[p + 2:p + 2 + tlen].decode()
    p += 2 + tlen
    partition, offset, epoch, mlen = NUMBERS.unpack_from(payload, p)
    p += NUMBERS.size
    metadata = None if mlen < 0 else payload[p:p + mlen].decode()
    return kind, group, topic, partition, offset, epoch, metadata


class OffsetStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._groups: dict[str, dict[tuple[str, int], Committed]] = {}
        records, good_end, size = self._replay()
        if good_end < size or records > self._live_count():
            self._compact()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _live_count(self) -> int:
        return sum(len(g) for g in self._groups.values())

    def _replay(self) -> tuple[int, int, int]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return 0, 0, 0
        pos = records = 0
        while pos + RECORD_HEAD.size <= len(data):
            length, crc = RECORD_HEAD.unpack_from(data, pos)
            payload = data[pos + RECORD_HEAD.size:pos + RECORD_HEAD.size + length]
            if length == 0 or len(payload) < length or crc32c.crc32c(payload) != crc:
                break
            try:
                self._apply(*_decode(payload))
            except (struct.error, UnicodeDecodeError, IndexError):
                break
            records += 1
            pos += RECORD_HEAD.size + length
        return records, pos, len(data)

    def _apply(self, kind: int, group: str, topic: str, partition: int, offset: int, epoch: int,
               metadata: str | None) -> None:
        if kind == COMMIT:
            self._groups.setdefault(group, {})[(topic, partition)] = (offset, metadata, epoch)
        elif kind == DELETE_GROUP:
            self._groups.pop(group, None)
        else:
            raise IndexError(f"unknown offsets record kind {kind}")

    def _compact(self) -> None:
        replace(self.path, b"".join(
            _encode(COMMIT, group, topic, partition, offset, epoch, metadata)
            for group, parts in self._groups.items()
            for (topic, partition), (offset, metadata, epoch) in parts.items()))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)

    def commit(self, group: str, topic: str, partition: int, offset: int, metadata: str | None = "",
               leader_epoch: int = -1) -> None:
        self.commit_many(group, [(topic, partition, offset, metadata, leader_epoch)])

    def commit_many(self, group: str,
                    entries: Iterable[tuple[str, int, int, str | None, int]]) -> None:
        """Commit several partitions' offsets with one fsync; durable on return."""
        entries = list(entries)
        data = b"".join(_encode(COMMIT, group, t, p, o, e, m) for t, p, o, m, e in entries)
        with self._lock:
            self._write(data)
            for t, p, o, m, e in entries:
                self._apply(COMMIT, group, t, p, o, e, m)

    def fetch(self, group: str, topic: str, partition: int) -> Committed | None:
        return self._groups.get(group, {}).get((topic, partition))

    def fetch_group(self, group: str) -> dict[tuple[str, int], Committed]:
        return dict(self._groups.get(group, {}))

    def groups(self) -> list[str]:
        return list(self._groups)

    def delete_group(self, group: str) -> None:
        with self._lock:
            if group not in self._groups:
                return
            self._write(_encode(DELETE_GROUP, group, "", 0, 0, 0, None))
            self._groups.pop(group, None)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
