"""The `gregor` client commands run as a user runs them (subprocesses), against a live Gregor and a
real Apache Kafka 3.9.0: one of each for the whole test session, both with auto-create off."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from tests.kit.gregor import ROOT
from tests.kit.both import GREGOR, KAFKA, started

SETTINGS = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"}


@dataclass
class Done:
    """A finished `gregor` run; stdout and stderr decoded as UTF-8."""

    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)

    def json_lines(self) -> list:
        return [json.loads(line) for line in self.stdout.splitlines()]


def gregor(*args: str | bytes, stdin: bytes = b"", timeout: float = 60) -> Done:
    """`python -m broker ARGS`; arguments may be bytes (not UTF-8) as a shell can pass them."""
    done = subprocess.run([sys.executable, "-m", "broker", *args], input=stdin, capture_output=True, cwd=ROOT,
                          timeout=timeout, check=False)
    return Done(done.returncode, done.stdout.decode(), done.stderr.decode())


def assert_fails(done: Done, status: int, *fragments: str) -> None:
    """One plain line on stderr, `gregor: ...`, naming what went wrong; nothing on stdout."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gregor: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@dataclass
class Target:
    name: str
    bootstrap: str

    def __call__(self, *args: str | bytes, stdin: bytes = b"", timeout: float = 60) -> Done:
        """Run `gregor ARGS --bootstrap <this broker>`."""
        return gregor(*args, "--bootstrap", self.bootstrap, stdin=stdin, timeout=timeout)


@pytest.fixture(scope="session", params=[GREGOR, KAFKA])
def target(request, tmp_path_factory) -> Target:
    with started(request.param, tmp_path_factory.mktemp(f"cli-{request.param}"), SETTINGS) as process:
        yield Target(request.param, process.bootstrap)
