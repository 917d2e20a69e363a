"""Writing a response given as buffers with scatter-gather sendmsg: fetch answers to clients
(broker/net/connection.py) and the commitlog shipped to followers (broker/cluster/shipping.py),
as memoryviews over the commitlog's mmap, reach the kernel without a copy in Python."""

from __future__ import annotations

import trio

IOV_BATCH = 512  # buffers per sendmsg call; Linux allows 1024 (IOV_MAX)


async def send_buffers(sock: trio.socket.SocketType, buffers: list) -> None:
    """Write a response given as buffers (fetch, and the commitlog shipped to followers:
    memoryviews over the commitlog's mmap) with scatter-gather sendmsg, so record bytes reach the
    kernel without a copy in Python.
    trio's SocketStream.send_all takes one buffer only, hence the direct socket call; this
    task is the connection's only sender, as send_all would otherwise enforce."""
    i = 0
    while i < len(buffers):
        chunk = buffers[i:i + IOV_BATCH]
        sent = await sock.sendmsg(chunk)
        for buf in chunk:
            if sent < len(buf):
                buffers[i] = memoryview(buf)[sent:]  # partly written: the rest goes next
                break
            sent -= len(buf)
            i += 1
