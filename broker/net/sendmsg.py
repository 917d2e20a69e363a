"""Writing buffers with scatter-gather sendmsg on a trio socket: the commitlog shipped to
followers (broker/cluster/shipping.py), memoryviews over the commitlog's mmap, reaches the kernel
without a copy in Python. (Client connections write theirs through broker/net/socket_io.py.)"""

from __future__ import annotations

import trio

from broker.net.socket_io import advance

IOV_BATCH = 512  # buffers per sendmsg call; Linux allows 1024 (IOV_MAX)


async def send_buffers(sock: trio.socket.SocketType, buffers: list) -> None:
    """Write buffers (the commitlog shipped to followers: memoryviews over the commitlog's
    mmap) with scatter-gather sendmsg, so record bytes reach the
    kernel without a copy in Python.
    trio's SocketStream.send_all takes one buffer only, hence the direct socket call; this
    task is the connection's only sender, as send_all would otherwise enforce."""
    i = 0
    while i < len(buffers):
        chunk = buffers[i:i + IOV_BATCH]
        i = advance(buffers, i, chunk, await sock.sendmsg(chunk))
