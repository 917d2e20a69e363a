"""What the `gregor` client commands say on stderr when a result would otherwise be silent (one
`gregor: ...` line; stdout stays what scripts read): a query that matched nothing, a group that
starts at the log end, a reset that committed (or a dry run that did not), an unknown setting with
its likely spellings. Against Gregor and Kafka alike: the CLI is a Kafka client."""

from __future__ import annotations

import subprocess
import sys
import uuid

from tests.cli.conftest import gregor
from tests.kit.gregor import ROOT


def test_a_time_query_that_matches_nothing_says_so(target, topic_name):
    target("topic", "create", topic_name)
    done = target("query", "--topic", topic_name, "--from", "0")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "gregor: no records match\n")


def test_consume_with_a_new_group_says_it_starts_at_the_log_end(target, topic_name):
    target("topic", "create", topic_name)
    target("produce", topic_name, stdin=b"old\n")
    group = f"billing-{uuid.uuid4().hex[:6]}"
    consume = subprocess.Popen([sys.executable, "-m", "broker", "consume", topic_name, "--group", group,
                                "--max-messages", "1", "--bootstrap", target.bootstrap], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = consume.stderr.readline().decode()
    assert first == (f"gregor: group {group} has no committed offsets on {topic_name}: it starts at the log end "
                     "(--from-beginning reads from the start)\n")
    target("produce", topic_name, stdin=b"new\n")
    out, err = consume.communicate(timeout=60)
    assert (consume.returncode, out, err) == (0, b"new\n", b"")


def test_reset_offsets_says_whether_it_committed(target, topic_name):
    target("topic", "create", topic_name)
    target("produce", topic_name, stdin=b"a\nb\n")
    group = f"reset-{uuid.uuid4().hex[:6]}"
    dry = target("group", "reset-offsets", group, "--topic", topic_name, "--to-latest", "--dry-run")
    assert dry.returncode == 0 and dry.stderr.startswith("gregor: dry run: nothing committed"), dry.stderr
    done = target("group", "reset-offsets", group, "--topic", topic_name, "--to-latest")
    assert (done.returncode, done.stderr) == (0, f"gregor: committed 1 offsets of group {group}\n")


def test_an_unknown_setting_names_the_likely_ones(tmp_path):
    done = gregor("serve", "--data-dir", str(tmp_path / "d"), "--port", "0", "--set", "log.retention.hour=1")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", (
        "gregor: unknown setting 'log.retention.hour'; did you mean log.retention.ms or log.retention.bytes or "
        "log.retention.check.interval.ms?\n"))


def test_an_unknown_argument_names_the_subcommand_it_was_given_to(target):
    done = target("topic", "list", "--bogus")
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", "gregor: topic list: unrecognized arguments: --bogus (see `gregor topic list --help`)\n")


def test_consume_and_query_leave_out_aborted_transactions_unless_asked(target, topic_name):
    from kafka import KafkaProducer

    target("topic", "create", topic_name)
    producer = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=f"cli-{topic_name}")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic_name, b"dropped", partition=0)
    producer.flush()  # written, then aborted (unsent records would simply be dropped by the abort)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(topic_name, b"kept", partition=0)
    producer.commit_transaction()
    producer.close()

    def consume(*extra: str) -> str:
        done = target("consume", topic_name, "--from-beginning", "--max-messages", "1", *extra)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert consume() == "kept\n"
    assert consume("--isolation-level", "read_uncommitted") == "dropped\n"
    queried = target("query", "--topic", topic_name, "--from", "0")
    assert [line.split('"value": ')[1].split(",")[0] for line in queried.stdout.splitlines()] == ['"kept"']
