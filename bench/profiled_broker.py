"""Run `gregor serve ...` under cProfile and write the stats when it stops (SIGTERM ends
the trio run normally, so the stats are complete). Profiles the event-loop thread only;
the store's flusher and allocator threads are not in it. Benchmark use only.

Run: .venv/bin/python bench/profiled_broker.py OUT.prof serve --data-dir DIR ...
"""

from __future__ import annotations

import cProfile
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.cli import main


def run() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return main(argv)
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    sys.exit(run())
