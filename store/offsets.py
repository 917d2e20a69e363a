"""Consumer-group committed offsets: the in-memory view of the state topic's offset records.

Durable as records of `__gregor_state` in the commitlog (store/state.py: key group/topic/
partition, value offset/leader epoch/metadata; a null value deletes), written through the
store and applied back here in commitlog order, so they survive a crash, reach a follower
with the rest of the commitlog, and take no file of their own. Never interprets group
membership: that is the broker's group coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from store import state

Committed = tuple[int, str | None, int]  # offset, metadata, leader epoch
Writer = Callable[[list[state.Record]], None]  # appends state records durably, then applies them


class OffsetStore:
    def __init__(self, writer: Writer | None = None) -> None:
        self._write = writer
        self._groups: dict[str, dict[tuple[str, int], Committed]] = {}

    def attach(self, writer: Writer) -> None:
        self._write = writer

    def apply(self, group: str, topic: str, partition: int, committed: Committed | None) -> None:
        """A state record, read back in commitlog order (the state view calls this)."""
        if committed is None:
            parts = self._groups.get(group)
            if parts is not None:
                parts.pop((topic, partition), None)
                if not parts:
                    del self._groups[group]
        else:
            self._groups.setdefault(group, {})[(topic, partition)] = committed

    def clear(self) -> None:
        self._groups.clear()

    def commit(self, group: str, topic: str, partition: int, offset: int, metadata: str | None = "",
               leader_epoch: int = -1) -> None:
        self.commit_many(group, [(topic, partition, offset, metadata, leader_epoch)])

    def commit_many(self, group: str,
                    entries: Iterable[tuple[str, int, int, str | None, int]]) -> None:
        """Commit several partitions' offsets as one commitlog batch; durable on return."""
        records = [(state.offset_key(group, t, p), state.encode_offset(o, m, e)) for t, p, o, m, e in entries]
        if records:
            self._write(records)

    def fetch(self, group: str, topic: str, partition: int) -> Committed | None:
        return self._groups.get(group, {}).get((topic, partition))

    def fetch_group(self, group: str) -> dict[tuple[str, int], Committed]:
        return dict(self._groups.get(group, {}))

    def groups(self) -> list[str]:
        return list(self._groups)

    def delete_group(self, group: str) -> None:
        """Forget a group's offsets: one tombstone per committed partition."""
        parts = self._groups.get(group)
        if parts:
            self._write([(state.offset_key(group, t, p), None) for t, p in list(parts)])
