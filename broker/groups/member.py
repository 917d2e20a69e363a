"""A group member and the values that pass between members and their group:
what a JoinGroup asks for, and the JoinGroup and SyncGroup answers.

Plain data with no rules of its own; broker/groups/state.py decides everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()  # the leader's copy only


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinReply = Callable[[JoinResult], None]
SyncReply = Callable[[SyncResult], None]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a JoinGroup asks for, independent of wire version."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_deadline: float
    assignment: bytes = b""
    is_new: bool = False
    join_reply: JoinReply | None = None
    sync_reply: SyncReply | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def answer_join(self, result: JoinResult) -> None:
        reply, self.join_reply = self.join_reply, None
        if reply is not None:
            reply(result)

    def answer_sync(self, result: SyncResult) -> None:
        reply, self.sync_reply = self.sync_reply, None
        if reply is not None:
            reply(result)
