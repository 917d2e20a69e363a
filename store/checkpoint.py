"""Checkpoint file and clean-shutdown marker.

Owns `<data_dir>/checkpoint` (format version 5, JSON, replaced atomically): commitlog write
position, newest store timestamp per segment, each queue's log start offset and log end
(the state topic's queue among them), leader-epoch histories that are not the single-node one,
the log cleaner's point in each compacted partition it cleaned, the open transactions of each
partition that has had transactional batches (with its aborted index's newest marker), and the
key index's last file and entry count with the commitlog position it
covers (the key dispatcher runs behind the writer); and `<data_dir>/clean_shutdown`,
an empty file present only between a clean close and the next open. A checkpoint is saved
only once the commitlog below its write position and the derived files up to its bounds are
on disk. Never decides what to rebuild: the Store does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from store.atomic_file import fsync_dir, replace

FORMAT_VERSION = 5
# version 1 lacks key_index: no recovery from it after a crash; versions before 3 lack
# key_position: their key index covered everything below write_position; versions before 4
# were written by Gregor 1, whose commitlog holds no state records (store/state.py); version 4
# lacks transactions: it was written before the store knew any
READABLE_VERSIONS = (1, 2, 3, 4, 5)


@dataclass
class Checkpoint:
    write_position: int = 0
    segments: dict[int, int] = field(default_factory=dict)  # segment start -> newest store ts
    queues: dict[str, tuple[int, int]] = field(default_factory=dict)  # "<topic_id>/<p>" -> (start, hw)
    key_index: tuple[int, int] | None = None  # (sequence of the last key-index file, its entry count)
    key_position: int | None = None  # commitlog position below which that key index is complete
    version: int = FORMAT_VERSION  # the format it was read in
    # "<topic_id>/<p>" -> [[epoch, start offset], ...] (store/epochs.py), only for partitions
    # whose history is not the single-node one (epoch 0 from the log start)
    epochs: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # "<topic_id>/<p>" -> (the log cleaner's point, the oldest tombstone timestamp it kept or
    # None), only for compacted partitions it has cleaned (store/compaction.py)
    cleaned: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    # "<topic_id>/<p>" -> (producer id -> first offset of its open transaction, the marker offset
    # of the aborted index's newest entry or None), for partitions that have had transactional
    # batches (store/transactions.py)
    transactions: dict[str, tuple[dict[int, int], int | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key_position is None:
            self.key_position = self.write_position

    def save(self, path: Path) -> None:
        doc = {"version": FORMAT_VERSION, "write_position": self.write_position,
               "segments": {str(k): v for k, v in self.segments.items()},
               "queues": {k: list(v) for k, v in self.queues.items()},
               "key_index": None if self.key_index is None else list(self.key_index),
               "key_position": self.key_position,
               "epochs": {k: [list(e) for e in v] for k, v in self.epochs.items()},
               "cleaned": {k: list(v) for k, v in self.cleaned.items()},
               "transactions": {k: {"open": sorted([pid, first] for pid, first in txns.items()),
                                    "last_aborted": last}
                                for k, (txns, last) in self.transactions.items()}}
        replace(path, json.dumps(doc).encode())

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if doc.get("version") not in READABLE_VERSIONS:
            return None
        key_index = doc.get("key_index")
        return cls(doc["write_position"], {int(k): v for k, v in doc["segments"].items()},
                   {k: (v[0], v[1]) for k, v in doc["queues"].items()},
                   None if key_index is None else (key_index[0], key_index[1]), doc.get("key_position"),
                   doc["version"], {k: [(e[0], e[1]) for e in v] for k, v in doc.get("epochs", {}).items()},
                   {k: (v[0], v[1]) for k, v in doc.get("cleaned", {}).items()},
                   {k: ({pid: first for pid, first in v["open"]}, v["last_aborted"])
                    for k, v in doc.get("transactions", {}).items()})


def queue_key(topic_id: str, partition: int) -> str:
    return f"{topic_id}/{partition}"


def mark_clean(marker: Path) -> None:
    marker.touch()
    fsync_dir(marker.parent)


def take_clean_mark(marker: Path) -> bool:
    """True if the last shutdown was clean; removes the marker so a crash from now on shows."""
    if not marker.exists():
        return False
    marker.unlink()
    fsync_dir(marker.parent)
    return True
