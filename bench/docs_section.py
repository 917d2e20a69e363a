"""Replace one benchmark's marked section of a docs page, leaving the others as they are."""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, start: str, end: str, body: str) -> None:
    """Write `start\\nbody\\nend` in place of the existing marked block, or append it."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{start}\n{body}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
