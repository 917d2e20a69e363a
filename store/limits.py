"""The process's open-file limit, which the number of partitions runs into.

Owns raising the soft RLIMIT_NOFILE to the hard limit. Every consume-queue file stays open
while it is mapped (CPython's mmap keeps its own duplicate of the descriptor), so a broker
with 10,000 partitions holds 10,000 descriptors, where many systems start a process with a
soft limit of 1,024. The JVM raises its soft limit to the hard one at startup (HotSpot's
MaxFDLimit), so a Kafka broker never meets the soft limit either. Called by the programs
(the broker, the store benchmark), never by the store itself: it changes the whole process.
"""

from __future__ import annotations

import resource

CAP = 1 << 20  # when the hard limit is unlimited: the kernel's default nr_open


def raise_open_file_limit() -> int:
    """Raise the soft limit on open files as far as the hard limit allows; returns the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = CAP if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # above the kernel's nr_open: keep what we have
            pass
    return soft
