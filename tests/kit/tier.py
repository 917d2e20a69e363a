"""Which tier of the suite runs: the per-push one (`bash bin/test`) or the full one (`--full`).

The full tier (GREGOR_TIER=full, set by `bash bin/test --full`) runs every Kafka cell against a
live Apache Kafka and every soak loop at its full count; the per-push tier answers Kafka cells from
their recorded verdicts (tests/kit/verdicts.py) and runs soak loops at a smaller count.
"""

from __future__ import annotations

import os

FULL = os.environ.get("GREGOR_TIER", "push") == "full"


def soak(full: int, push: int) -> int:
    """A soak loop's count: `full` in the full tier, `push` per push; GREGOR_SOAK=full|push forces one."""
    forced = os.environ.get("GREGOR_SOAK")
    if forced in ("full", "push"):
        return full if forced == "full" else push
    return full if FULL else push
