import signal
import subprocess
import sys
import time

import pytest

from broker.cluster import sasl as node_sasl
from broker.cli.main import build_parser, config_from_args
from broker.config import ConfigError
from tests.kit.gregor import ROOT, TEST_SEGMENT_BYTES


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
    (["--set", "replica.selector.class=com.example.Nearest"], "replica.selector.class: com.example.Nearest is not"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL"],
     "security.inter.broker.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, not 'SASL'"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL_PLAINTEXT"],
     "sasl.mechanism.inter.broker.protocol=GSSAPI: Gregor's nodes log in with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL_PLAINTEXT",
      "--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"], "needs sasl.jaas.config"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL_PLAINTEXT",
      "--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256", "--set",
      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="n" password="p";'],
     "sasl.jaas.config names org.apache.kafka.common.security.plain.PlainLoginModule; SCRAM-SHA-256 logs in with"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL_PLAINTEXT",
      "--set", "sasl.mechanism.inter.broker.protocol=PLAIN", "--set",
      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="n";'],
     "sasl.jaas.config needs username="),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL_SSL",
      "--set", "sasl.mechanism.inter.broker.protocol=PLAIN"], "security.inter.broker.protocol=SASL_SSL needs ssl.truststore"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SSL"],
     "security.inter.broker.protocol=SSL needs ssl.truststore.location"),
    (["--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SSL",
      "--set", "ssl.truststore.location=/nonexistent/ca.pem"], "needs ssl.keystore.location"),
])
def test_bad_settings_are_refused_with_the_setting_named(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse(*argv)


def test_a_nodes_sasl_login_is_read_from_kafkas_jaas_form():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required\n  username="node-1" '
            'password="p\\"w";')
    config = parse("--set", "zookeeper.connect=127.0.0.1:2181", "--set", "security.inter.broker.protocol=SASL_PLAINTEXT",
                   "--set", "sasl.mechanism.inter.broker.protocol=scram-sha-512", "--set", f"sasl.jaas.config={jaas}",
                   "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256")
    login = node_sasl.login_settings(config.values)
    assert (login.mechanism, login.username, login.password) == ("SCRAM-SHA-512", "node-1", 'p"w')
    assert login.accepted == ("SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256")
    assert "p\"w" not in repr(login)


def test_cli_prints_one_plain_line_and_exits_2_on_bad_setting():
    proc = subprocess.run([sys.executable, "-m", "broker", "serve", "--set", "flush.mode=never"], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["gregor: bad value for flush.mode: expected async or sync, got 'never'"]


def test_a_fatal_signal_leaves_every_threads_stack_in_the_log(tmp_path):
    """A SIGBUS from a mapping ends the process without a Python traceback; the broker enables
    faulthandler so its stderr still says where each thread was (SIGSEGV stands in here)."""
    err = tmp_path / "stderr"
    with open(err, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "broker", "serve", "--data-dir", str(tmp_path / "data"),
                                 "--host", "127.0.0.1", "--port", "0",
                                 "--set", f"commitlog.segment.bytes={TEST_SEGMENT_BYTES}"], cwd=ROOT,
                                stdout=subprocess.DEVNULL,
                                stderr=out)
    try:
        deadline = time.monotonic() + 60
        while b"listening on" not in err.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGSEGV)
        assert proc.wait(30) == -signal.SIGSEGV
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    assert "Fatal Python error: Segmentation fault" in text
    assert text.count("Thread 0x") >= 3  # the event loop and the store's threads
    assert 'File "' in text
