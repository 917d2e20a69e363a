"""admin.token: with it set, every request to the admin HTTP API needs `Authorization: Bearer TOKEN`
(else 401 and `WWW-Authenticate: Bearer`); without it the API may listen on loopback only, and a
broker told to serve it elsewhere refuses to start before it binds anything."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from broker.cli.main import build_parser, config_from_args
from broker.config import ConfigError
from tests.kit.wire import WireClient
from tests.kit.gregor import ROOT, TEST_SEGMENT_BYTES, BrokerProcess

TOKEN = "s3cret-admin-token-0123456789"
UNKNOWN_ID = "0" * 32
BROKER = 4  # DescribeConfigs resource type
ADMIN = re.compile(r"admin API on http://([\d.]+:\d+)")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("admin-token") / "data",
                      {"commitlog.segment.bytes": TEST_SEGMENT_BYTES, "admin.token": TOKEN},
                      extra_args=["--admin-port", "0"])
    b.start()
    deadline = time.monotonic() + 10
    while not ADMIN.search(b.log()) and time.monotonic() < deadline:
        time.sleep(0.05)
    b.admin = ADMIN.search(b.log()).group(1)
    yield b
    b.stop()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def get(broker, path: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(f"http://{broker.admin}{path}")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_the_right_token_is_served(broker):
    status, _, body = get(broker, "/metrics", f"Bearer {TOKEN}")
    assert status == 200 and b"gregor_requests_total" in body
    status, _, body = get(broker, f"/v1/messages?msg_id={UNKNOWN_ID}", f"bearer {TOKEN}")  # the scheme in any case
    assert status == 404 and "no message with id" in json.loads(body)["error"]


@pytest.mark.parametrize("path", ["/metrics", f"/v1/messages?msg_id={UNKNOWN_ID}", "/nowhere"])
@pytest.mark.parametrize("authorization", [None, "Bearer", "Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
                                           f"Basic {TOKEN}", TOKEN],
                         ids=["none", "empty", "wrong", "longer", "shorter", "basic", "no-scheme"])
def test_no_token_or_a_wrong_one_gets_401(broker, path, authorization):
    status, headers, body = get(broker, path, authorization)
    assert status == 401
    assert headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in json.loads(body)["error"]


def test_the_token_never_reaches_the_log_or_describe_configs(broker):
    get(broker, "/metrics", "Bearer wrong")
    get(broker, "/metrics", f"Bearer {TOKEN}")
    assert "refused: wrong bearer token" in broker.log()
    assert TOKEN not in broker.log()
    client = WireClient(broker.bootstrap)
    try:
        answer = client.request(DescribeConfigsRequest[1](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER, resource_name="0", configuration_keys=["admin.token"])], include_synonyms=False))
    finally:
        client.close()
    [entry] = answer.results[0].configs
    assert (entry.name, entry.value, entry.is_sensitive) == ("admin.token", None, True)


def test_gregor_query_takes_the_token_from_the_environment(broker):
    def query(env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "broker", "query", "--admin", broker.admin, "--msg-id", UNKNOWN_ID],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
                              env={k: v for k, v in os.environ.items() if k != "GREGOR_ADMIN_TOKEN"} | env)
    without = query({})
    assert without.returncode == 1 and "query failed (401)" in without.stderr and "$GREGOR_ADMIN_TOKEN" in without.stderr
    served = query({"GREGOR_ADMIN_TOKEN": TOKEN})
    assert served.returncode == 1 and "query failed (404): no message with id" in served.stderr


def parse(*argv: str):
    return config_from_args(build_parser().parse_args(["serve", *argv]))


@pytest.mark.parametrize("host", ["0.0.0.0", "", "192.0.2.7", "broker.example.com"])
def test_an_admin_api_beyond_loopback_needs_a_token(host):
    with pytest.raises(ConfigError, match="admin.token must be set"):
        parse("--host", host, "--admin-port", "9093")
    assert parse("--host", host, "--admin-port", "9093", "--set", f"admin.token={TOKEN}")["admin.token"] == TOKEN
    assert parse("--host", host).admin_port is None  # no admin API: nothing to protect


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_an_admin_api_on_loopback_may_go_without_a_token(host):
    assert parse("--host", host, "--admin-port", "9093").admin_port == 9093


def test_a_broker_asked_for_a_public_admin_api_without_a_token_exits_2_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp_path / "data"),
                           "--host", "0.0.0.0", "--port", "0", "--admin-port", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [("gregor: admin.token must be set: the admin HTTP API (--admin-port) would "
                                         "listen on 0.0.0.0, beyond loopback")]
    assert not (tmp_path / "data").exists()  # refused before the store opened, let alone a port
