"""A connection's receive deadlines: connections.max.idle.ms between requests, request.timeout.ms
for the rest of a partly received one, enforced by a watchdog task per connection.

A `trio.move_on_after` around every receive cost 7 us of a produce request on the event loop (a
cancel scope made, its deadline registered and removed, each time); here the reader only notes
when it starts and stops waiting. The watchdog cancels the reader's scope only while the reader
waits in a receive, never while it handles a request or writes an answer. Never reads or writes
the stream itself.
"""

from __future__ import annotations

import math

import trio


class ReceiveTimer:
    """Enter `scope` once around the read loop; around each receive set `waiting_since` (now)
    and `limit` (seconds), and put `waiting_since` back to None after it. `expired` says that the
    watchdog ended the wait (the scope's cancellation is then caught by it)."""

    __slots__ = ("expired", "limit", "poll_s", "scope", "waiting_since")

    def __init__(self, idle_s: float, partial_s: float) -> None:
        self.scope = trio.CancelScope()
        self.waiting_since: float | None = None
        self.limit = math.inf
        self.expired = False
        # Look again at least this often: a wait begun meanwhile is then seen before the shorter
        # limit could have passed, so no deadline is missed (each is met within the scheduler's
        # latency), and a connection costs four wake-ups per shorter limit when idle.
        self.poll_s = max(min(idle_s, partial_s) / 4, 0.001)

    async def watch(self) -> None:
        """Run beside the reader until cancelled, or until it ends a wait that ran too long."""
        while True:
            since = self.waiting_since
            if since is None:
                await trio.sleep(self.poll_s)
                continue
            deadline = since + self.limit
            now = trio.current_time()
            if now < deadline:
                # never past the next poll: this wait may end and a shorter one begin meanwhile
                await trio.sleep_until(min(deadline, now + self.poll_s))
                continue
            self.expired = True
            self.scope.cancel()
            return
