"""broker/security/auth_limit.py without a network: failed.authentication.limit failures from one address
within failed.authentication.window.ms refuse its new connections until they leave the window."""

from __future__ import annotations

import re

import pytest

from broker.security.auth_limit import FailedAuthentications
from broker.cli.main import build_parser, config_from_args
from broker.config import ConfigError

A, B = "127.0.0.1", "127.0.0.2"


def failed(limits: FailedAuthentications, address: str, *times_ms: float) -> None:
    for at in times_ms:
        limits.record(address, at)


def test_an_address_under_the_limit_is_served():
    limits = FailedAuthentications(limit=3, window_ms=1000)
    failed(limits, A, 0, 10)
    assert limits.refusal(A, 20) is None


def test_the_limit_reached_within_the_window_refuses_that_address():
    limits = FailedAuthentications(limit=3, window_ms=1000)
    failed(limits, A, 0, 10, 20)
    refusal = limits.refusal(A, 30)
    assert refusal is not None
    assert "failed.authentication.limit (3 within 1000 ms) reached for 127.0.0.1" in refusal.reason
    assert "refused for 970 ms more" in refusal.reason


def test_other_addresses_are_still_served():
    limits = FailedAuthentications(limit=3, window_ms=1000)
    failed(limits, A, 0, 10, 20)
    failed(limits, B, 0, 10)
    assert limits.refusal(B, 30) is None


def test_failures_spread_wider_than_the_window_never_refuse():
    limits = FailedAuthentications(limit=3, window_ms=1000)
    failed(limits, A, 0, 600, 1200, 1800, 2400)
    assert limits.refusal(A, 2500) is None


def test_the_address_is_served_again_once_its_oldest_failure_leaves_the_window():
    limits = FailedAuthentications(limit=3, window_ms=1000)
    failed(limits, A, 0, 500, 900)
    assert limits.refusal(A, 999) is not None
    assert limits.refusal(A, 1000) is None


def test_later_failures_keep_the_address_refused_until_they_age_out():
    limits = FailedAuthentications(limit=2, window_ms=1000)
    failed(limits, A, 0, 100, 800)  # the third from a connection accepted before the refusals began
    assert limits.refusal(A, 1050) is not None  # 100 and 800 are still in the window
    assert limits.refusal(A, 1100) is None


def test_only_the_first_refusal_in_a_window_is_reported():
    limits = FailedAuthentications(limit=1, window_ms=1000)
    failed(limits, A, 0)
    assert [limits.refusal(A, at).first for at in (10, 20, 500)] == [True, False, False]
    failed(limits, A, 900)  # still refused a window after the first report: reported once more
    assert [limits.refusal(A, at).first for at in (1010, 1020)] == [True, False]


def test_a_new_round_of_refusals_is_reported_again():
    limits = FailedAuthentications(limit=1, window_ms=1000)
    failed(limits, A, 0)
    assert limits.refusal(A, 10).first
    assert limits.refusal(A, 1000) is None
    failed(limits, A, 1100)
    assert limits.refusal(A, 1200).first


def test_each_address_is_reported_on_its_own():
    limits = FailedAuthentications(limit=1, window_ms=1000)
    failed(limits, A, 0)
    failed(limits, B, 0)
    assert limits.refusal(A, 10).first and limits.refusal(B, 10).first


def test_limit_zero_never_refuses():
    limits = FailedAuthentications(limit=0, window_ms=1000)
    failed(limits, A, *range(100))
    assert limits.refusal(A, 100) is None


def test_memory_stays_bounded_by_the_limit_and_the_window():
    limits = FailedAuthentications(limit=3, window_ms=1000)
    failed(limits, A, *range(1000))
    assert len(limits.failures[A]) == 3
    for i in range(500):
        limits.record(f"10.0.{i // 256}.{i % 256}", 1000)
    limits.refusal(A, 1001)
    limits.record(B, 5000)  # a window later: addresses with no failure left in it are forgotten
    assert set(limits.failures) == {B}
    assert limits.reported == {}


@pytest.mark.parametrize("setting, message", [
    ("failed.authentication.limit=-1", "failed.authentication.limit must be 0 (no limit) or more"),
    ("failed.authentication.window.ms=0", "failed.authentication.window.ms must be positive"),
])
def test_a_negative_limit_or_an_empty_window_is_refused_at_start(setting, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_args(build_parser().parse_args(["serve", "--set", setting]))
