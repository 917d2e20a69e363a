"""Fixed loopback ports for servers the suite restarts on the same port (broker groups, KRaft voters,
ZooKeeper, Connect workers), taken below the kernel's ephemeral range.

A port from bind(("127.0.0.1", 0)) is in the ephemeral range, the range every outgoing connection
draws its local port from: while a node is down for a restart, a client or replication connection
of any test may take that port, and the node cannot listen again ("address already in use", seen in
CI on a 3-node group's restart). A port below the range is only ever taken by an explicit bind, so it
stays free between a stop and the restart. Ports are drawn at random (two suites run side by side in
CI) and checked free when handed out; one process never hands out the same port twice."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_given: set[int] = set()
_LOWEST = 10000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port below the ephemeral range, free now and not handed out before by this process."""
    top = _ephemeral_start()
    if top - _LOWEST < 1000:  # an unusual port range: fall back to the OS's choice
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(1000):
        port = random.randrange(_LOWEST, top)
        if port not in _given and _free(port):
            _given.add(port)
            return port
    raise RuntimeError(f"no free loopback port between {_LOWEST} and {top}")
