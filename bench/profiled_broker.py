"""Run `gregor serve ...` under cProfile and write the stats when it stops (SIGTERM ends
the trio run normally, so the stats are complete). Profiles the event-loop thread only,
timed by that thread's CPU clock: time spent descheduled (the clients share 2 CPUs with the
broker) is not charged to whatever call was running. The store's flusher and allocator
threads are not in it. Benchmark use only.

Run: .venv/bin/python bench/profiled_broker.py OUT.prof serve --data-dir DIR ...
"""

from __future__ import annotations

import cProfile
import os
import sys
import time

sys.path.insert(0, os.getcwd())  # the broker source bench/broker_process.py runs us in

from broker.cli.main import main


def run() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    try:
        return main(argv)
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    sys.exit(run())
