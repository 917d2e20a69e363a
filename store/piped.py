"""A produced batch whose bytes wait in a pipe, to be spliced into the commitlog at its entry's place.

The leader's side of one copy from socket to page cache (RocketMQ's master copies a request's body
from its Netty buffer into the mapped commitlog; a follower here already splices shipped chunks,
store/follower.py). The connection moves a large batch from the socket into the pipe with
splice(2) (broker/net/splice.py) — the socket's pages are referenced, not copied — and the append
splices it from the pipe into the file behind the entry's header (CommitLog.append), where the
page cache takes its one copy. The batch's CRC is then checked from the mapping, and the entry
written around it only if it holds; a batch that fails leaves zeros behind.

Whoever needs the bytes themselves — a topic that parses records (tags, compaction, LogAppendTime,
transactions), a refusal that must first check the CRC as Kafka does — calls `materialize`,
which reads them out of the pipe: the old way's copy, for those cases only. Knows nothing of the
network: a pipe's read end, the batch's size and its first bytes.
"""

from __future__ import annotations

import os


class PipedBatch:
    """`size` bytes of one record batch in the pipe read from `fd`, whose 61-byte header
    (protocol.record_batch.HEADER_SIZE) is `head` too, read from the socket for the checks. The
    pipe is the connection's: it holds this batch only, and the connection empties it (`drop`)
    once the request is answered, whatever became of the batch."""

    __slots__ = ("fd", "head", "left", "size")

    def __init__(self, fd: int, size: int, head: bytes) -> None:
        self.fd = fd
        self.size = size
        self.head = head
        self.left = size  # bytes still in the pipe

    def __len__(self) -> int:
        return self.size

    def materialize(self) -> bytearray:
        """The batch's bytes, read out of the pipe (it must still hold all of them)."""
        if self.left != self.size:
            raise ValueError("the batch's bytes have already left the pipe")
        out = bytearray(self.size)
        with memoryview(out) as view:
            got = 0
            while got < self.size:
                n = os.readv(self.fd, [view[got:]])
                if not n:
                    raise OSError("the pipe ended before the batch")
                got += n
        self.left = 0
        return out

    def splice_into(self, fd: int, offset: int) -> None:
        """Move all of the batch from the pipe into file `fd` at `offset` (the page cache copies it)."""
        if self.left != self.size:
            raise ValueError("the batch's bytes have already left the pipe")
        left = self.size
        while left:
            n = os.splice(self.fd, fd, left, offset_dst=offset)
            if not n:
                raise OSError("the pipe ended before the batch")
            self.left -= n
            left -= n
            offset += n

    def drop(self) -> None:
        """Read and forget what is still in the pipe (the batch was refused or never reached the store)."""
        while self.left:
            n = len(os.read(self.fd, min(self.left, 1 << 20)))
            if not n:
                break
            self.left -= n
