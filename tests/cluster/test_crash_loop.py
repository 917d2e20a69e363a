"""A crash loop over a 3-node broker group: random nodes SIGKILLed (and restarted) while an
idempotent acks=all producer writes; at the end every acknowledged record is in the log, at its
acknowledged offset, once, and every node is back in the sync-state set."""

from __future__ import annotations

import os
import random
import time

import pytest

from compat_tests.clients import make_client
from tests.cluster.load import CHUNK, LoadLoop, check_log, create_topic, read_all
from tests.kit.tier import soak

pytestmark = [pytest.mark.crash, pytest.mark.clients]
KILLS = int(os.environ.get("GREGOR_CLUSTER_KILLS", soak(full=50, push=5)))


def test_sigkill_loop_over_the_group_loses_no_acknowledged_record(broker_group):
    # A 2 s session (the others' 4 s): each kill's wait for ZooKeeper to notice it halves, and the
    # 50 kills took 157 s instead of 235. A session expiring under load on its own is one more
    # failover, which this test is about anyway.
    group = broker_group(3, **{"replica.lag.time.max.ms": "3000", "zookeeper.session.timeout.ms": "2000"})
    create_topic(group, "crash-loop")
    load = LoadLoop(make_client("confluent-kafka", group.bootstrap), "crash-loop")
    load.start()
    rng = random.Random(18)
    masters_killed = 0
    try:
        load.wait_chunks(2, timeout=120)
        for kill in range(KILLS):
            master = group.master(timeout=60)
            # the first kill is the master's, so a short loop (per push: 5 kills) fails over too
            victim = master if kill == 0 else rng.choice(sorted(group.nodes))
            masters_killed += victim == master
            group.kill(victim)
            time.sleep(rng.uniform(0.0, 1.5))
            group.restart(victim)  # waits out its old session, then rejoins as follower or master
        group.wait_sync_state_set(3, timeout=120)
        done = load.chunks_acked
        load.wait_chunks(done + 2, timeout=120)
    finally:
        load.stop_event.set()
        load.join(120)
    check_log(read_all(group, "crash-loop"), load)
    assert masters_killed >= KILLS // 5, f"only {masters_killed} of {KILLS} kills hit the master"
    assert len(load.acked) >= 4 * CHUNK
