"""Damage done to a stopped broker's files on purpose: index entries read back, and bytes flipped in place."""

from __future__ import annotations

from pathlib import Path

from store import entry as E


def _entries(data_dir: Path) -> list[tuple[Path, int, E.EntryHeader]]:
    """(segment file, offset in file, header) of every valid entry, oldest first."""
    out = []
    for path in sorted((data_dir / "commitlog").iterdir()):
        view = memoryview(path.read_bytes())
        local = 0
        while True:
            e = E.read_entry(view, local, int(path.name))
            if not isinstance(e, E.EntryHeader):
                break
            out.append((path, local, e))
            local += e.length
    return out


def _flip(path: Path, at: int, count: int = 1) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        data = bytearray(f.read(count))
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in data))
