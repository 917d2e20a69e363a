"""What a replicated store has appended but its in-sync replicas may not hold yet.

Replication acknowledges commitlog positions (a follower holds every byte below the position it
asks for next), while readers see a high watermark per partition. This queue maps the one onto
the other: each append or applied entry leaves (end position, partition, next offset), and once
the replicas hold a position every entry ending at or below it moves its partition's high
watermark on. The cost is one deque append per batch and one pop per batch acknowledged, never
a look at the partitions that were not written (10,000 partitions cost what one does).
Holds no lock of its own: the Store calls it under its append lock. Never does I/O.
"""

from __future__ import annotations

from collections import deque

from store.partition import Partition


class Unreplicated:
    def __init__(self) -> None:
        self.entries: deque[tuple[int, Partition, int]] = deque()
        self.position = 0  # what the replicas are known to hold

    def add(self, end_position: int, part: Partition, next_offset: int) -> None:
        self.entries.append((end_position, part, next_offset))

    def advance(self, position: int) -> list[Partition]:
        """The replicas hold everything below `position`: high watermarks move; returns the
        partitions whose high watermark moved (each once)."""
        if position <= self.position:
            return []
        self.position = position
        moved: dict[int, Partition] = {}
        entries = self.entries
        while entries and entries[0][0] <= position:
            _, part, next_offset = entries.popleft()
            if part.hw is not None and next_offset > part.hw:
                part.hw = next_offset
                moved[id(part)] = part
        return list(moved.values())

    def pending_from(self, parts: list[Partition], position: int) -> None:
        """Start over from the partitions' current state (a change of role, a truncation): a
        partition whose log end is past its high watermark is pending until `position`, the
        commitlog end, is replicated."""
        self.entries.clear()
        self.position = 0
        for part in parts:
            end = part.queue.high_watermark
            if part.hw is None or part.hw > end:
                part.hw = end if part.hw is None else min(part.hw, end)
            if part.hw < end:
                self.entries.append((position, part, end))
