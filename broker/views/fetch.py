"""Reading a view's partition: MetaQ §7.3 filtering over the source's consume queue.

Entries whose tag hash is not one of the view's are skipped by comparing the
consume queue's tag-hash column with numpy; their commitlog bytes are never
read. Only batches holding at least one hash match are read, and
broker/views/batches.py checks the real header values there, so a hash
collision never leaks a record. Offsets with no match at the end of the scanned
range are covered by an empty batch so consumers move past them. Work per call
is bounded by SCAN_LIMIT queue entries. Never writes.

A view shows committed records only (issue 19): it ends at the source's last stable offset,
and a batch of an aborted transaction is skipped like a batch without a match.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from broker.views.batches import filter_batch, gap_batch
from broker.views.definition import View
from store import OffsetOutOfRange, Store

SCAN_CHUNK = 1 << 16  # queue entries compared per numpy call
SCAN_LIMIT = 1 << 22  # queue entries scanned per partition per fetch (32 MiB of tag hashes)
_LAST_DELTA = struct.Struct(">i")
_BASE = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ViewRead:
    batches: list[bytes | memoryview]
    matched_bytes: int  # bytes of batches with records (empty gap batches not counted)
    high_watermark: int
    log_start_offset: int


def read_view(store: Store, view: View, tag_header: str, partition: int, offset: int,
              max_bytes: int) -> ViewRead:
    """Batches of the view from `offset`, at most `max_bytes` of them except the first (KIP-74)."""
    source = view.source
    hw = store.last_stable_offset(source, partition)
    start = store.log_start_offset(source, partition)
    if offset < start or offset > hw:
        raise OffsetOutOfRange(f"{view.name}-{partition} offset {offset} outside [{start}, {hw}]")
    wanted = view.tag_hashes()
    batches: list[bytes | memoryview] = []
    size = 0
    covered = offset  # every offset below this is answered by the batches so far
    pos = offset  # every offset below this has been dealt with
    stop = min(hw, offset + SCAN_LIMIT)
    scanned = offset  # tag hashes compared up to here
    pending = np.empty(0, dtype=np.int64)  # matching offsets in [pos, scanned), ascending

    def scan(until: int) -> None:
        nonlocal scanned, pending
        while scanned < until:
            end = min(until, scanned + SCAN_CHUNK)
            hits = np.flatnonzero(np.isin(store.tag_hashes(source, partition, scanned, end), wanted))
            if hits.size:
                pending = np.concatenate((pending, hits + scanned))
            scanned = end

    while True:
        while not pending.size and scanned < stop:
            scan(min(stop, scanned + SCAN_CHUNK))
        if not pending.size:
            pos = scanned
            break
        batch = store.read(source, partition, int(pending[0]), 1).batches[0]
        base = _BASE.unpack_from(batch, 0)[0]
        last = base + _LAST_DELTA.unpack_from(batch, 23)[0]
        scan(last + 1)
        inside = int(np.searchsorted(pending, last, side="right"))
        candidates = (pending[:inside] - base).tolist()  # offset deltas
        data = None if store.aborted_batch(source, partition, batch, base, last + 1) else filter_batch(
            batch, candidates, tag_header, view.tags)
        if data is not None:
            if batches and size + len(data) > max_bytes:
                pos = base
                break
            batches.append(data)
            size += len(data)
            covered = last + 1
        pending = pending[inside:]
        pos = last + 1
        if size >= max_bytes:
            break
    if pos > covered:
        batches.append(gap_batch(covered, pos - 1))
    return ViewRead(batches, size, hw, start)
