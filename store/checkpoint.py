"""Checkpoint file and clean-shutdown marker.

Owns `<data_dir>/checkpoint` (format version 1, JSON, replaced atomically): commitlog write
position, newest store timestamp per segment, and each queue's log start offset and high
watermark; and `<data_dir>/clean_shutdown`, an empty file present only between a clean
close and the next open. Never decides what to rebuild: the Store does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from store.atomic_file import fsync_dir, replace

FORMAT_VERSION = 1


@dataclass
class Checkpoint:
    write_position: int = 0
    segments: dict[int, int] = field(default_factory=dict)  # segment start -> newest store ts
    queues: dict[str, tuple[int, int]] = field(default_factory=dict)  # "<topic_id>/<p>" -> (start, hw)

    def save(self, path: Path) -> None:
        doc = {"version": FORMAT_VERSION, "write_position": self.write_position,
               "segments": {str(k): v for k, v in self.segments.items()},
               "queues": {k: list(v) for k, v in self.queues.items()}}
        replace(path, json.dumps(doc).encode())

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if doc.get("version") != FORMAT_VERSION:
            return None
        return cls(doc["write_position"], {int(k): v for k, v in doc["segments"].items()},
                   {k: (v[0], v[1]) for k, v in doc["queues"].items()})


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
