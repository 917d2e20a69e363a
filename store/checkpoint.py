"""Checkpoint file and clean-shutdown marker.

Owns `<data_dir>/checkpoint` (format version 3, JSON, replaced atomically): commitlog write
position, newest store timestamp per segment, each queue's log start offset and high
watermark, and the key index's last file and entry count with the commitlog position it
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

FORMAT_VERSION = 3
# version 1 lacks key_index: no recovery from it after a crash; versions before 3 lack
# key_position: their key index covered everything below write_position
READABLE_VERSIONS = (1, 2, 3)


@dataclass
class Checkpoint:
    write_position: int = 0
    segments: dict[int, int] = field(default_factory=dict)  # segment start -> newest store ts
    queues: dict[str, tuple[int, int]] = field(default_factory=dict)  # "<topic_id>/<p>" -> (start, hw)
    key_index: tuple[int, int] | None = None  # (sequence of the last key-index file, its entry count)
    key_position: int | None = None  # commitlog position below which that key index is complete

    def __post_init__(self) -> None:
        if self.key_position is None:
            self.key_position = self.write_position

    def save(self, path: Path) -> None:
        doc = {"version": FORMAT_VERSION, "write_position": self.write_position,
               "segments": {str(k): v for k, v in self.segments.items()},
               "queues": {k: list(v) for k, v in self.queues.items()},
               "key_index": None if self.key_index is None else list(self.key_index),
               "key_position": self.key_position}
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
                   None if key_index is None else (key_index[0], key_index[1]), doc.get("key_position"))


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
