"""The event model the applications share, in plain Python (no Spark).

Seed 001's story: a user registration fans out to SMS, coupon and push services through a queue
instead of three synchronous calls; orders go through created → paid → closed. Every record's
value is one JSON event, its key the user id, and its `tag` header the event type, which is what
a Gregor source topic created with `tag.header=tag` indexes for tag-filtered views.

Generation is deterministic (a seed and a start time), so tests and the README can compute the
exact aggregates a Spark job must produce with `expected_aggregates`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass

TAG_HEADER = "tag"
EVENT_TYPES = ("user.registered", "order.created", "order.paid", "order.closed")
# One registration per four orders events, roughly the shape of a shop's traffic.
TYPE_CYCLE = ("user.registered", "order.created", "order.paid", "order.created", "order.paid",
              "order.closed", "order.created", "order.paid")
WINDOW_MS = 60_000


@dataclass(frozen=True)
class Event:
    seq: int
    type: str
    user_id: str
    order_id: str | None
    amount_cents: int
    event_time_ms: int

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    def headers(self) -> list[tuple[str, bytes]]:
        return [(TAG_HEADER, self.type.encode()), ("producer", b"spark_examples.generate_events")]


def generate_round(round_index: int, count: int, start_ms: int, minutes: int, seed: int) -> list[Event]:
    """Round r: `count` events spread evenly over `minutes` whole minutes starting at
    start_ms + r * minutes (event time), so no one-minute window spans two rounds."""
    rng = random.Random(f"{seed}:{round_index}")
    round_start = start_ms + round_index * minutes * WINDOW_MS
    step = minutes * WINDOW_MS // count
    events = []
    for i in range(count):
        seq = round_index * count + i
        kind = TYPE_CYCLE[seq % len(TYPE_CYCLE)]
        user = f"user-{rng.randrange(1, 50):03d}"
        is_order = kind.startswith("order.")
        events.append(Event(
            seq=seq,
            type=kind,
            user_id=user,
            order_id=f"order-{seq // 3:05d}" if is_order else None,
            amount_cents=rng.randrange(100, 50_000) if kind == "order.paid" else 0,
            event_time_ms=round_start + i * step,
        ))
    return events


def expected_aggregates(events: Iterable[Event]) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(window_start_ms, type) -> (events, amount_cents, max_amount_cents) for one-minute windows."""
    out: dict[tuple[int, str], tuple[int, int, int]] = {}
    for e in events:
        key = (e.event_time_ms - e.event_time_ms % WINDOW_MS, e.type)
        count, total, top = out.get(key, (0, 0, 0))
        out[key] = (count + 1, total + e.amount_cents, max(top, e.amount_cents))
    return out


def closed_windows(aggregates: dict[tuple[int, str], tuple[int, int, int]], max_event_time_ms: int,
                   watermark_delay_ms: int) -> dict[tuple[int, str], tuple[int, int, int]]:
    """The windows an append-mode query has emitted once it has seen `max_event_time_ms`: those
    ending at or before the watermark (max event time minus the delay)."""
    watermark = max_event_time_ms - watermark_delay_ms
    return {k: v for k, v in aggregates.items() if k[0] + WINDOW_MS <= watermark}
