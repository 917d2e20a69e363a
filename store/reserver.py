"""Disk blocks for consume queues, reserved ahead of their writers by a background thread.

Owns the thread that extends the reservation of the queues the append path names: those
whose writer came within `ConsumeQueue.refill_at` of the end of their reserved entries. So
`posix_fallocate`, and creating and mapping a queue's next file, run off the append path
(off the broker's event loop). Never decides how much is reserved: the queue does. A writer
that reaches the end before the thread has served its queue reserves for itself, as it
always did, and a full disk is StorageFull there.
"""

from __future__ import annotations

import collections
import logging
import threading

from store.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)


class QueueReserver:
    def __init__(self) -> None:
        self._pending: collections.deque[ConsumeQueue] = collections.deque()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="queue-reserver", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, queue: ConsumeQueue) -> None:
        """Reserve ahead for `queue` soon; call under the append lock."""
        if queue.reserve_requested < 0:
            queue.reserve_requested = queue.reserved
            self._pending.append(queue)
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait()
            self._wake.clear()
            while self._pending and not self._stopping:
                queue = self._pending.popleft()
                try:
                    queue.reserve_ahead(queue.reserve_requested)
                except OSError as exc:  # StorageFull included: the writer meets it itself
                    log.debug("reserving ahead in %s failed: %s", queue.directory, exc)
                finally:
                    queue.reserve_requested = -1

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
