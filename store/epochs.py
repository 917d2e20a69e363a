"""Leader epochs of one partition: which epoch's leader wrote which offsets.

Kafka's leader-epoch checkpoint (LeaderEpochFileCache): a list of (epoch, start offset), one
entry per epoch in which the partition got data or a leader, epochs and offsets increasing.
OffsetForLeaderEpoch answers from it, so a returning follower or a client that saw an older
leader learns where that epoch ended and truncates there. Derived, as the consume queue is:
every stored batch carries the epoch of the leader that appended it (its partitionLeaderEpoch
field), the dispatcher assigns an epoch when a batch of a newer one arrives, and the
checkpoint saves the list. Sans-IO: the store calls it under its append lock.
"""

from __future__ import annotations

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochCache:
    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Epoch `epoch` starts at `start_offset` (a new leader's log end, or the first batch of
        that epoch a follower or recovery meets). Older or equal epochs are ignored; entries
        that start at or after the new one are replaced (Kafka's rule)."""
        if epoch <= self.latest_epoch and self.entries:
            return
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's endOffsetFor: for the latest epoch, the log end; for
        an older one, the largest epoch not above it and the start of the epoch after that;
        (-1, -1) below the first epoch or above the latest."""
        if not self.entries or epoch > self.latest_epoch:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end
        floor = None
        for i, (e, _) in enumerate(self.entries):
            if e > epoch:
                return (UNDEFINED_EPOCH, UNDEFINED_OFFSET) if floor is None else (floor, self.entries[i][1])
            floor = e
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET  # unreachable: the latest epoch is above `epoch`

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut back to `end_offset`: forget epochs that start at or after it."""
        while len(self.entries) > 1 and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        if self.entries and self.entries[-1][1] > end_offset:
            self.entries[-1] = (self.entries[-1][0], end_offset)
