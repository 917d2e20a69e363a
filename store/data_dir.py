"""The data directory's lock, start-over marker and clean slate (RocketMQ's and Kafka's lock files).

Helpers of Store's opening (store/store.py) and of a follower starting over from its master's
copy (store/follower.py): the `.lock` one process holds while the store is open, the
START_OVER_FILE a partial copy leaves, removing the commitlog with everything derived from it,
Gregor 1's topics joining the registry before recovery (store/legacy.py), and removing queue
directories no topic owns.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

from store import legacy
from store.atomic_file import fsync_dir
from store.errors import StoreError
from store.state import STATE_TOPIC, StateView
from store.topics import TopicRegistry

log = logging.getLogger(__name__)


def lock_data_dir(root: Path) -> int:
    """An exclusive flock on `<root>/.lock`, as an open file descriptor (closing it releases)."""
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(f"data directory {root} is in use by another process (its .lock is held); "
                         "stop that broker first") from None
    return fd


START_OVER_FILE = "start_over"  # present while a follower's commitlog is a partial copy (Store.start_over)


def discard_derived_and_log(root: Path) -> None:
    """Remove the commitlog and every file derived from it (not the directory's lock, nor the
    broker's own files such as cluster_id)."""
    for name in ("commitlog", "consumequeue", "index"):
        shutil.rmtree(root / name, ignore_errors=True)
    for name in ("checkpoint", "clean_shutdown", START_OVER_FILE):
        (root / name).unlink(missing_ok=True)
    fsync_dir(root)


def adopt_legacy_topics(view: StateView, old: legacy.Legacy | None) -> None:
    """Gregor 1's topics.json joins the registry before recovery derives queues, so their
    data is derived; the records that make it durable are written once the store is open."""
    if old is not None:
        for meta in old.topics:
            if meta.name not in view.registry.topics:
                view.registry.apply(meta.name, meta)


def remove_stray_queues(qroot: Path, registry: TopicRegistry) -> None:
    """Queue directories no topic owns: left by a crash between a topic's delete record and
    the removal of its files (or before a create record was written)."""
    if not qroot.is_dir():
        return
    for path in qroot.iterdir():
        if path.name != STATE_TOPIC and path.name not in registry.topics:
            log.info("removing %s: no topic of that name exists", path)
            shutil.rmtree(path, ignore_errors=True)
