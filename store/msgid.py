"""Message ids: where a record lives, encoded so it decodes without any index.

Owns the id format (version 1): 32 lowercase hex digits of the big-endian bytes
node_id u32 | batch commitlog position i64 | record offset delta u32. Never looks anything up.
"""

from __future__ import annotations

import struct

MSG_ID = struct.Struct(">IqI")


def encode(node_id: int, batch_position: int, offset_delta: int) -> str:
    return MSG_ID.pack(node_id, batch_position, offset_delta).hex()


def decode(msg_id: str) -> tuple[int, int, int] | None:
    """(node_id, batch_position, offset_delta), or None if this is not a message id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        return None
    if len(raw) != MSG_ID.size:
        return None
    return MSG_ID.unpack(raw)
