"""Which records of a commitlog range go into the key index: the walk the dispatcher's thread (store/dispatch.py) and the key worker process (store/key_worker.py) share."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from protocol.record_batch import CONTROL_BIT
from store import entry as E
from store import records
from store.segment_walk import resync


ATTRIBUTES_LOW = 22  # a batch's attributes (i16 at 21) end here: the byte with the codec, transactional, control bits


KeyColumns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # hashes, batch positions, store ts, deltas


def index_entries(seg, local: int, stop: int, rolled: bool, indexed: Callable[[str, int, bytes], bool],
                  max_entries: int = 1 << 30, deadline: float | None = None,
                  max_bytes: int = 1 << 62) -> tuple[int, KeyColumns]:
    """Walk whole entries of commitlog segment `seg` from local offset `local` to `stop` (the
    bytes below it are completely written) and collect the keys of records of entries whose
    topic `indexed` says are key-indexed. Entries are read by their headers only (no CRC:
    below the write position they were written here, or validated by recovery or by
    append_replicated); bytes recovery marked corrupt are stepped over. `rolled`: the writer
    moved on to a later segment, so a blank marker or zeros end this one. Returns the local
    offset reached and the keys as columns. It stops after `max_entries` entries, at
    `deadline`, or once `max_bytes` of entries are walked (whole entries). Used by the dispatcher thread and, in its own
    process, by the key worker (store/key_worker.py); `seg` needs `view`, `find`, `start`, `size`."""
    hashes: list[int] = []
    positions: list[int] = []
    stamps: list[int] = []
    deltas: list[int] = []
    view = seg.view
    unpack_prefix, unpack_header = E.PREFIX.unpack_from, E.ENTRY_HEADER.unpack_from
    key_hash = records.key_hash
    done = 0
    budget_end = local + max_bytes
    while local < stop:
        if stop - local < E.PREFIX_SIZE:
            local = seg.size if rolled else local  # unused bytes at a full segment's end
            break
        length, _crc, magic, _flags, topic_length = unpack_prefix(view, local)
        if magic == E.MAGIC_BLANK or (length == 0 and magic == 0):
            if rolled:  # the writer rolled on: the rest of this segment is unused
                local = seg.size
            break
        if magic != E.MAGIC_DATA or length < E.HEADER_SIZE + topic_length or local + length > stop:
            nxt = resync(seg, local, stop)  # bytes recovery marked corrupt: step over them
            if nxt is None:
                break
            local = nxt
            continue
        fields = unpack_header(view, local)
        topic = bytes(view[local + length - topic_length:local + length]).decode()
        # a transaction marker's record has a key, but it is no message's
        if not view[local + E.HEADER_SIZE + ATTRIBUTES_LOW] & CONTROL_BIT and indexed(topic, fields[6], fields[5]):
            batch_position = seg.start + local + E.HEADER_SIZE
            for delta, key in records.record_keys(view[local + E.HEADER_SIZE:local + length - topic_length]):
                hashes.append(key_hash(topic, key))
                positions.append(batch_position)
                stamps.append(fields[9])
                deltas.append(delta)
        local += length
        done += 1
        if done >= max_entries or local >= budget_end or (deadline is not None and time.perf_counter() >= deadline):
            break
    return local, (np.array(hashes, dtype=np.uint64), np.array(positions, dtype=np.int64),
                   np.array(stamps, dtype=np.int64), np.array(deltas, dtype=np.uint32))
