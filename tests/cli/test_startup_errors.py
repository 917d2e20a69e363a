"""`gregor serve` that cannot start says why in one `gregor: ...` line, exits non-zero and creates
nothing on the way: a port in use (the listener's or the admin API's), ZooKeeper out of reach, a
data directory another broker holds, an unknown log level; `gregor settings | head` ends quietly."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.cli.conftest import assert_fails, gregor
from tests.kit.gregor import ROOT, start_broker


@pytest.fixture
def busy_port():
    """A loopback port another program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_listener_port_in_use_is_named_and_no_data_dir_is_made(tmp_path, busy_port):
    data = tmp_path / "data"
    done = gregor("serve", "--data-dir", str(data), "--port", str(busy_port))
    assert_fails(done, 1, f"cannot listen on 127.0.0.1:{busy_port}", "listener PLAINTEXT", "address already in use")
    assert not data.exists()


def test_an_admin_port_in_use_is_named_and_no_data_dir_is_made(tmp_path, busy_port):
    data = tmp_path / "data"
    done = gregor("serve", "--data-dir", str(data), "--port", "0", "--admin-port", str(busy_port))
    assert_fails(done, 1, f"cannot listen on 127.0.0.1:{busy_port}", "--admin-port", "address already in use")
    assert not data.exists()


def test_zookeeper_out_of_reach_is_one_line_after_the_connection_timeout(tmp_path):
    with socket.socket() as s:  # bound, then closed: nothing answers there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "data"
    done = gregor("serve", "--data-dir", str(data), "--port", "0", "--set", f"zookeeper.connect=127.0.0.1:{port}",
                  "--set", "zookeeper.connection.timeout.ms=1500")
    assert_fails(done, 1, f"cannot reach ZooKeeper at 127.0.0.1:{port} within 1.5 s", "zookeeper.connect")
    assert not data.exists()


def test_a_data_dir_another_broker_holds_is_named(tmp_path):
    first = start_broker(tmp_path)
    try:
        done = gregor("serve", "--data-dir", str(first.data_dir), "--port", "0")
        assert_fails(done, 1, f"data directory {first.data_dir} is in use by another process")
    finally:
        first.stop()


def test_an_unknown_log_level_lists_the_choices(tmp_path):
    done = gregor("serve", "--data-dir", str(tmp_path / "data"), "--port", "0", "--log-level", "verbose")
    assert_fails(done, 2, "--log-level", "invalid choice: 'VERBOSE'", "DEBUG", "CRITICAL")
    assert not (tmp_path / "data").exists()


def test_settings_into_a_closed_pipe_ends_quietly():
    done = subprocess.run(f"{sys.executable} -m broker settings | head -1", shell=True, cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "" and done.stdout.count("\n") == 1


def test_settings_marks_the_ones_that_change_at_run_time():
    done = subprocess.run([sys.executable, "-m", "broker", "settings"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    lines = {line.split("=", 1)[0]: line for line in done.stdout.splitlines()}
    assert "changes at run time too" in lines["log.retention.ms"]
    assert "changes at run time too" not in lines["flush.mode"]


@pytest.mark.parametrize("setting, words", [
    ("group.consumer.session.timeout.ms=30000", "between group.consumer.min.session.timeout.ms"),
    ("group.consumer.heartbeat.interval.ms=20000", "between group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.assignors=sticky", "uniform and/or range"),
])
def test_kip848_group_settings_out_of_bounds_stop_the_start_in_one_line(tmp_path, setting, words):
    done = subprocess.run([sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0",
                           "--set", setting], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and done.stderr.startswith("gregor: ") and words in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "d").exists()
