"""broker/security/auth_limit.py's FailedLogins, sans-IO: every failed login waits
connection.failed.authentication.delay.ms (Kafka's delay); from failed.authentication.limit
failures of one identity (user name and address) within the window on, each further failure
waits twice as long, up to MAX_WAIT_MS; other identities, and the right password, are never
slowed; a success forgets the identity's failures."""

from __future__ import annotations

from broker.security.auth_limit import MAX_IDENTITIES, MAX_WAIT_MS, FailedLogins


def logins(limit: int = 3) -> FailedLogins:
    return FailedLogins(delay_ms=100, limit=limit, window_ms=60_000)


def test_under_the_limit_each_failure_waits_kafkas_delay():
    f = logins()
    assert [f.failed("10.0.0.1", "alice", t).wait_ms for t in (0, 1)] == [100, 100]


def test_from_the_limit_on_the_wait_doubles_up_to_the_cap():
    f = logins()
    waits = [f.failed("10.0.0.1", "alice", t).wait_ms for t in range(10)]
    assert waits[:2] == [100, 100]
    assert waits[2:6] == [200, 400, 800, 1600]
    assert waits[-1] == MAX_WAIT_MS and max(waits) == MAX_WAIT_MS


def test_the_first_throttled_failure_of_an_identity_in_a_window_is_the_one_reported():
    f = logins()
    reported = [f.failed("10.0.0.1", "alice", t).first for t in range(6)]
    assert reported == [False, False, True, False, False, False]
    assert f.failed("10.0.0.1", "alice", 61_000 + 5).first is False  # its failures left the window: counted anew
    assert [f.failed("10.0.0.1", "alice", 61_000 + t).first for t in range(6, 9)] == [False, True, False]


def test_other_users_and_other_addresses_are_not_slowed():
    f = logins()
    for t in range(5):
        f.failed("10.0.0.1", "alice", t)
    assert f.failed("10.0.0.1", "bob", 10).wait_ms == 100  # behind the same NAT
    assert f.failed("10.0.0.2", "alice", 10).wait_ms == 100


def test_failures_leave_the_window():
    f = logins()
    for t in range(3):
        f.failed("10.0.0.1", "alice", t)
    assert f.failed("10.0.0.1", "alice", 3).wait_ms > 100
    assert f.failed("10.0.0.1", "alice", 70_000).wait_ms == 100


def test_a_success_forgets_the_identitys_failures():
    f = logins()
    for t in range(5):
        f.failed("10.0.0.1", "alice", t)
    f.succeeded("10.0.0.1", "alice")
    assert f.failed("10.0.0.1", "alice", 10).wait_ms == 100


def test_limit_zero_keeps_kafkas_delay_only():
    f = logins(limit=0)
    assert {f.failed("10.0.0.1", "alice", t).wait_ms for t in range(50)} == {100}
    assert f.failures == {}


def test_invented_user_names_share_one_count_past_the_identity_bound():
    f = logins(limit=2)
    for i in range(MAX_IDENTITIES):
        f.failed("10.0.0.9", f"u{i}", 0)
    assert len(f.failures) == MAX_IDENTITIES
    waits = [f.failed("10.0.0.9", f"new{i}", 1).wait_ms for i in range(3)]
    assert len(f.failures) == MAX_IDENTITIES + 1 and waits == [100, 200, 400]
    f.failed("10.0.0.9", "late", 60_001)  # a window later the sweep makes room again
    assert len(f.failures) == 1
