"""glibc malloc settings for the broker process: keep freed request buffers for the next request.

Every produce request is read into new buffers the size of its frame (the bytes received, the
decoder's buffer, the frame handed to the handlers: protocol/framing.py), about 1 MB each under
librdkafka's default batching, and freed once appended. With glibc's defaults the heap's free top
goes back to the kernel as soon as it passes the trim threshold (twice the largest buffer freed
so far, so a few MB), and the next request's buffers fault in fresh zeroed pages again: in a
perf profile of a 1-partition produce at 700 MB/s, page faults, brk() and munmap() were a third
of the event loop's time (broker CPU 1.33 s/GB against 0.73 with these settings:
docs/notes/benchmark-history.md). The JVM keeps its heap for the same reason.

mallopt() through ctypes because Python has no binding for it. Raising M_MMAP_THRESHOLD to its
largest value (32 MiB) also stops glibc from moving the threshold by itself; frames above it
(up to socket.request.max.bytes) are still mapped and unmapped one by one. At most TRIM_THRESHOLD
bytes of freed heap stay resident after a burst. Called by the program (`gregor serve`), never by
library code: it changes the whole process. Does nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 64 << 20
MMAP_THRESHOLD = 32 << 20  # glibc's upper bound on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)


def keep_freed_heap() -> bool:
    """Apply the settings; True when the C library took them."""
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
