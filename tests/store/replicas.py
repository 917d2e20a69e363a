"""A master's and a follower's stores in one process, and the shipping of a commitlog between them."""

from __future__ import annotations

from store import Store
from tests.store.conftest import append, build_batch, tiny_config


TOPICS = {"orders": (2, {"tag.header": "tag"}), "users": (1, {"key.index.enable": "true"})}


def make(path, follower: bool = False) -> Store:
    """A leader with the topics, or an empty follower: it gets them, like everything else,
    from the leader's commitlog (their records in the state topic)."""
    s = Store.open(path, tiny_config())
    if not follower:
        for name, (partitions, configs) in TOPICS.items():
            s.create_topic(name, partitions, configs)
    return s


def fill(s: Store, start: int, count: int) -> None:
    for i in range(start, start + count):
        append(s, "orders", i % 2, build_batch([bytes([i % 256]) * 300, b"x"], keys=[f"o{i}".encode(), None],
                                               headers=[[("tag", b"paid" if i % 3 else b"new")], []]))
        append(s, "users", 0, build_batch([b"u%d" % i], keys=[f"u{i}".encode()]))


def ship(leader: Store, follower: Store, chunk: int = 5000) -> None:
    """Pull the leader's commitlog into the follower until both ends meet (MetaQ's HA loop)."""
    while follower.log_end_position < leader.log_end_position:
        position, data = leader.read_log(follower.log_end_position, chunk)
        follower.append_replicated(position, data)
