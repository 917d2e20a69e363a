"""Pipes sized for splice(2): the one copy from a socket into the commitlog's file, for a follower's
shipped chunks (broker/cluster/shipping.py) and a client's large produce batches
(broker/net/splice.py). The kernel hands the socket's pages to the pipe and copies them once, into
the page cache, where recv into a buffer and then pwrite copied each byte twice."""

from __future__ import annotations

import fcntl
import os

PIPE_BYTES = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size; librdkafka's batch.size is 1,000,000
AVAILABLE = hasattr(os, "splice")  # elsewhere than Linux: recv and pwrite


def open_pipe(size: int = PIPE_BYTES) -> tuple[int, int, int]:
    """(read end, write end, capacity in bytes): a pipe of `size` bytes, capped by
    /proc/sys/fs/pipe-max-size, or of the default size when this user's pipe quota refuses more
    (more calls, same bytes). Raises OSError when no pipe can be made (out of descriptors)."""
    read_fd, write_fd = os.pipe()
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(size, int(f.read()))
        size = fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        size = fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ)
    return read_fd, write_fd, size
