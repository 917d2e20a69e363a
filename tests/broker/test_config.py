import subprocess
import sys

import pytest

from broker.cli import build_parser, config_from_args
from broker.config import ConfigError
from tests.conftest import ROOT


def parse(*argv):
    return config_from_args(build_parser().parse_args(["serve", *argv]))


def test_defaults_are_the_embedded_ones():
    config = parse()
    assert (str(config.data_dir), config.host, config.port) == ("gregor-data", "127.0.0.1", 9092)
    assert config["num.partitions"] == 1 and config["auto.create.topics.enable"] is True
    assert config["flush.mode"] == "async"


def test_properties_file_then_set_overrides(tmp_path):
    props = tmp_path / "b.properties"
    props.write_text("# comment\nnum.partitions=4\nflush.mode = sync\n")
    config = parse("--config", str(props), "--set", "num.partitions=6")
    assert config["num.partitions"] == 6 and config["flush.mode"] == "sync"
    assert {"num.partitions", "flush.mode"} <= config.explicit


@pytest.mark.parametrize("argv, message", [
    (["--set", "no.such=1"], "unknown setting 'no.such'"),
    (["--set", "num.partitions=abc"], "bad value for num.partitions"),
    (["--set", "flush.mode=sometimes"], "expected async or sync"),
    (["--set", "num.partitions=0"], "num.partitions must be positive"),
    (["--set", "commitlog.segment.bytes=1000000"], "must exceed message.max.bytes"),
])
def test_bad_settings_are_refused_with_the_setting_named(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse(*argv)


def test_cli_prints_one_plain_line_and_exits_2_on_bad_setting():
    proc = subprocess.run([sys.executable, "-m", "broker", "serve", "--set", "flush.mode=never"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["gregor: bad value for flush.mode: expected async or sync, got 'never'"]
