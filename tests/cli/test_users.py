"""`gregor user add|delete|list --data-dir`: SCRAM credentials in a stopped broker's data dir;
a live broker's directory is refused in one line (its .lock)."""

from __future__ import annotations

from tests.cli.conftest import assert_fails, gregor
from tests.kit.gregor import start_broker


def test_add_list_delete_and_the_salted_record(tmp_path):
    data = tmp_path / "data"
    added = gregor("user", "add", "alice", "--password", "alice-secret", "--data-dir", str(data))
    assert added.returncode == 0, added.stderr
    assert gregor("user", "add", "alice", "--password", "other", "--mechanism", "SCRAM-SHA-512",
                  "--iterations", "8192", "--data-dir", str(data)).returncode == 0
    listed = gregor("user", "list", "--data-dir", str(data))
    assert listed.stdout.splitlines() == ["alice\tSCRAM-SHA-256\titerations=4096",
                                                   "alice\tSCRAM-SHA-512\titerations=8192"]
    commitlog = b"".join(p.read_bytes() for p in (data / "commitlog").iterdir())
    assert b"alice-secret" not in commitlog and b"other" not in commitlog  # salted, never the password
    assert gregor("user", "delete", "alice", "--data-dir", str(data)).returncode == 0
    assert gregor("user", "list", "--data-dir", str(data)).stdout.splitlines() == [
        "alice\tSCRAM-SHA-512\titerations=8192"]
    assert_fails(gregor("user", "delete", "alice", "--data-dir", str(data)), 1, "alice has no SCRAM-SHA-256 credential")
    assert_fails(gregor("user", "add", "bob", "--password", "x", "--iterations", "100", "--data-dir", str(data)),
                 1, "--iterations must be 4096-16384")


def test_a_running_brokers_data_dir_is_refused_in_one_line(tmp_path):
    broker = start_broker(tmp_path)
    try:
        done = gregor("user", "add", "alice", "--password", "pw", "--data-dir", str(broker.data_dir))
    finally:
        broker.stop()
    assert_fails(done, 1, "in use by another process", "stop that broker first")
