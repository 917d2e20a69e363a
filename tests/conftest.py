"""Shared fixtures: a real Gregor broker in a subprocess, on a free port (tests/kit/gregor.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal

import pytest

from tests.kit.gregor import BrokerProcess, _running, start_broker


@pytest.fixture(autouse=True)
def _no_broker_outlives_its_test():
    """A broker a test started and did not stop (it failed half-way) is stopped when the test ends;
    brokers of module and session fixtures were started before this runs and are left alone."""
    before = list(_running)
    yield
    for broker in [b for b in _running if b not in before]:
        broker.stop(signal.SIGKILL)


@pytest.fixture(autouse=True)
def _key_lookups_wait_for_the_index(monkeypatch):
    """Stores opened in the test process: a key lookup waits until the key index holds what was
    written before it (up to a minute, not the second a broker gives it). The index is built off the
    write path, in a worker process started once a key-indexed topic exists; on a loaded CI machine
    that start took over a second, and tests comparing every key's hits failed on what was not yet
    indexed. Tests of a lookup that answers before the index caught up pass wait_s themselves."""
    import store.lookups
    monkeypatch.setattr(store.lookups, "KEY_LOOKUP_WAIT_S", 60.0)


@pytest.fixture(scope="session")
def gregor_session(tmp_path_factory) -> BrokerProcess:
    broker = start_broker(tmp_path_factory.mktemp("gregor"), **{"group.initial.rebalance.delay.ms": "0"})
    yield broker
    broker.stop()
    shutil.rmtree(broker.data_dir, ignore_errors=True)


@pytest.fixture
def gregor(gregor_session: BrokerProcess) -> str:
    """Bootstrap address of a shared live broker (unique topic names per test keep tests apart)."""
    if gregor_session.proc.poll() is not None:
        pytest.fail(f"the shared broker died:\n{gregor_session.log()[-4000:]}")
    return gregor_session.bootstrap


@pytest.fixture
def bootstrap(gregor: str) -> str:
    return os.environ.get("GREGOR_BOOTSTRAP") or gregor


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of the test's own, with settings; stopped at the end."""
    started: list[BrokerProcess] = []

    def make(name: str = "data", **settings: str) -> BrokerProcess:
        broker = start_broker(tmp_path, name, **settings)
        started.append(broker)
        return broker

    yield make
    for broker in started:
        broker.stop()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


_counter = iter(range(1_000_000))


@pytest.fixture
def topic_name(request) -> str:
    base = re.sub(r"[^a-zA-Z0-9]", "-", request.node.name)[:80]
    return f"{base}-{os.getpid()}-{next(_counter)}"


