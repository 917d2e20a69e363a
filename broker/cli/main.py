"""`gregor` command line: the broker (`gregor serve`, `gregor settings`) and the operator's client
commands, which speak only the Kafka protocol (`gregor topic`, `group`, `acl`, `produce`, `consume`,
`cluster`, `query`; broker/cli/admin.py, cli_groups.py, cli_acl.py, cli_records.py).

Every failure prints one line, `gregor: ...`, on stderr: bad arguments or settings exit with
status 2, a command the broker refused or could not be reached for with 1. The parser and the
dispatch live here; what each command does lives in its module.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from broker.cli import acl as cli_acl

from broker.cli import admin as cli_admin

from broker.cli import groups as cli_groups

from broker.cli import records as cli_records

from broker.cli import users as cli_users
from broker.cli.connect import CliError
from broker.cli.format import DEFAULT_BOOTSTRAP, UsageError, parse_bootstrap, parse_key_value

if TYPE_CHECKING:
    from broker.config import BrokerConfig

EPILOG = """\
client commands (each takes --bootstrap HOST:PORT, default 127.0.0.1:9092):
  gregor topic create|list|describe|alter|add-partitions|delete|create-view
  gregor group list|describe|reset-offsets|delete
  gregor acl add|list|remove
  gregor produce TOPIC < lines          gregor consume TOPIC [--from-beginning]
  gregor cluster info                   gregor query --topic T (--key K --admin H:P | --from TIME)
They speak only the Kafka protocol, so they work against Apache Kafka too (docs/cli.md).
Exit status: 0 done, 1 the command failed (one line on stderr), 2 bad arguments."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line like every other error."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("gregor").strip()
        self.exit(2, f"gregor: {where + ': ' if where else ''}{message} (see `{self.prog} --help`)\n")

    def parse_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's signature
        """As argparse's, but an unknown argument is named with the (sub)command it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            where = " ".join(c for c in (command, getattr(parsed, f"{command}_command", None)) if c)
            self.exit(2, f"gregor: {where + ': ' if where else ''}unrecognized arguments: {' '.join(extras)} "
                         f"(see `gregor {where + ' ' if where else ''}--help`)\n")
        return parsed


def _arg(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type from a cli_format parser: its UsageError becomes argparse's error line."""
    def convert(text: str) -> object:
        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__
    return convert


def _bootstrap(text: str) -> str:
    parse_bootstrap(text)
    return text


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise UsageError(f"expected 0 or more, got {value}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise UsageError("expected 1 or more, got 0")
    return value


TABLE_OR_JSON = "text: an aligned table (default); json: one line of JSON, for scripts"


def _client(sub: argparse._SubParsersAction, name: str, run: Callable, help: str, *, output: str | None = None,
            description: str | None = None) -> argparse.ArgumentParser:
    """A client command's parser: --bootstrap, --command-config (TLS and SASL settings), and
    --output (its help `output`) where it prints data."""
    parser = sub.add_parser(name, help=help, description=description or help)
    parser.add_argument("--bootstrap", type=_arg(_bootstrap), default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"a broker of the cluster, Gregor or Kafka (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties: security.protocol, sasl.mechanism, sasl.jaas.config "
                        "(or sasl.username, sasl.password), ssl.truststore.location, ssl.keystore.location "
                        "(PEM files)")
    if output:
        parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help=output)
    parser.set_defaults(run=run)
    return parser


def _add_topic(sub: argparse._SubParsersAction) -> None:
    topic = sub.add_parser("topic", help="create, list, describe, alter and delete topics",
                           description="Topic administration over the Kafka protocol (works against Apache "
                           "Kafka too). `gregor topic COMMAND --help` for each command.")
    cmds = topic.add_subparsers(dest="topic_command", required=True, metavar="COMMAND")
    config = {"type": _arg(parse_key_value), "action": "append", "default": [], "metavar": "KEY=VALUE"}

    create = _client(cmds, "create", cli_admin.create, "create a topic (CreateTopics)")
    create.add_argument("name", help="topic name")
    create.add_argument("--partitions", type=_arg(_positive), default=-1, metavar="N",
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("--replicas", type=_arg(_positive), default=-1, metavar="N",
                        help="replication factor (default: the broker's default.replication.factor)")
    create.add_argument("--config", **config, help="a topic config, e.g. retention.ms=3600000; repeatable")

    listed = _client(cmds, "list", cli_admin.list_topics, "list topics with partition and replica counts",
                     output=TABLE_OR_JSON)
    listed.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")

    describe = _client(cmds, "describe", cli_admin.describe, "a topic's partitions, offsets and configs",
                       output=TABLE_OR_JSON, description="A topic's partitions (leader, replicas, ISR, log start and "
                       "end offsets) and every config with its value and source (DescribeConfigs).")
    describe.add_argument("name", help="topic name")

    alter = _client(cmds, "alter", cli_admin.alter, "set or delete topic configs (IncrementalAlterConfigs)",
                    description="Set or delete topic configs with IncrementalAlterConfigs: configs not named "
                    "keep their values. A deleted config goes back to the broker's default.")
    alter.add_argument("name", help="topic name")
    alter.add_argument("--config", **config, help="set a config; repeatable")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a config override; repeatable")

    grow = _client(cmds, "add-partitions", cli_admin.add_partitions,
                   "raise a topic's partition count (CreatePartitions)")
    grow.add_argument("name", help="topic name")
    grow.add_argument("--to", type=_arg(_positive), required=True, metavar="N", help="the new total partition count")

    delete = _client(cmds, "delete", cli_admin.delete, "delete topics (DeleteTopics)",
                     description="Delete topics (DeleteTopics). On Gregor, deleting a source topic also "
                     "deletes its views.")
    delete.add_argument("names", nargs="+", metavar="NAME")

    view = _client(cmds, "create-view", cli_admin.create_view, "create a tag-filtered, read-only view of a topic",
                   description="Create a tag-filtered, read-only view of a topic (Gregor only: CreateTopics "
                   "with configs view.source and view.tags; docs/extensions.md).")
    view.add_argument("name", help="name of the new view")
    view.add_argument("--source", required=True, help="source topic (must have tag.header set)")
    view.add_argument("--tags", required=True, help="comma-separated tags the view lets through")


def _add_group(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("group", help="list, describe, reset and delete consumer groups",
                           description="Consumer groups over the Kafka protocol (works against Apache Kafka "
                           "too). `gregor group COMMAND --help` for each command.")
    cmds = group.add_subparsers(dest="group_command", required=True, metavar="COMMAND")
    _client(cmds, "list", cli_groups.list_groups, "list consumer groups with their state", output=TABLE_OR_JSON)

    describe = _client(cmds, "describe", cli_groups.describe, "a group's members, offsets and lag", output=TABLE_OR_JSON,
                       description="A group's state, its members and their assignment, and per partition the "
                       "committed (current) offset, the log end offset and the lag between them.")
    describe.add_argument("group", help="group id")

    reset = _client(cmds, "reset-offsets", cli_groups.reset_offsets, "move a stopped group's committed offsets",
                    output=TABLE_OR_JSON, description="Commit new offsets for a group on a topic's partitions, as "
                    "kafka-consumer-groups --reset-offsets --execute does; a group with active members is "
                    "refused. Offsets are held within [log start, log end]; a time with no record at or "
                    "after it goes to the log end. Times without a zone are UTC.")
    reset.add_argument("group", help="group id (a group that does not exist yet gets the offsets)")
    reset.add_argument("--topic", required=True, metavar="TOPIC[:P,...]",
                       help="the topic, or some of its partitions (orders:0,2)")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=_arg(_non_negative), metavar="N", help="this offset")
    to.add_argument("--to-datetime", metavar="TIME",
                    help="the first record at or after TIME (ISO 8601, e.g. 2026-01-31T08:00:00Z, or epoch ms)")
    to.add_argument("--by-duration", metavar="DURATION",
                    help="the first record at or after now minus DURATION (ISO 8601, e.g. PT10M, P1DT2H)")
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the new offsets without committing them")
    run.add_argument("--execute", action="store_true",
                       help="commit the new offsets (the default; accepted as kafka-consumer-groups takes it)")

    delete = _client(cmds, "delete", cli_groups.delete, "delete groups and their offsets (DeleteGroups)")
    delete.add_argument("groups", nargs="+", metavar="GROUP")


def _add_acl(sub: argparse._SubParsersAction) -> None:
    acl = sub.add_parser("acl", help="add, list and remove ACLs",
                         description="ACL bindings over the Kafka protocol (CreateAcls, DescribeAcls, DeleteAcls), "
                         "as kafka-acls; the broker needs an authorizer (authorizer.class.name). "
                         "`gregor acl COMMAND --help` for each command.")
    cmds = acl.add_subparsers(dest="acl_command", required=True, metavar="COMMAND")
    add = _client(cmds, "add", cli_acl.add, "allow or deny a principal operations on a resource")
    listed = _client(cmds, "list", cli_acl.list_acls, "the ACLs a filter selects", output=TABLE_OR_JSON)
    remove = _client(cmds, "remove", cli_acl.remove, "remove the ACLs a filter selects, printing them",
                     output=TABLE_OR_JSON, description="Remove the ACLs a filter selects and print "
                     "them. A filter that selects every ACL (no selector) needs --all.")
    for parser in (add, listed, remove):
        filtering = parser is not add
        parser.add_argument("--principal", type=_arg(cli_acl.parse_principal), required=not filtering,
                            metavar="TYPE:NAME", help="e.g. User:alice; User:* is every principal")
        parser.add_argument("--host", default=None if filtering else "*",
                            help="the client address the ACL applies to" + ("" if filtering else " (default *)"))
        parser.add_argument("--operation", type=_arg(cli_acl.parse_operations), action="append",
                            default=[], required=not filtering, metavar="OP[,OP...]",
                            help=f"repeatable; {cli_acl.OPERATION_NAMES}")
        permission = parser.add_mutually_exclusive_group()
        permission.add_argument("--allow", action="store_true",
                                help="only ALLOW ACLs" if filtering else "allow the operations (default)")
        permission.add_argument("--deny", action="store_true",
                                help="only DENY ACLs" if filtering else "deny the operations")
        resource = parser.add_mutually_exclusive_group(required=not filtering)
        name = {"type": _arg(cli_acl.parse_resource_name), "metavar": "NAME"}
        resource.add_argument("--topic", **name, help="a topic (or topic name prefix with --prefixed)")
        resource.add_argument("--group", **name, help="a consumer group")
        resource.add_argument("--transactional-id", **name, help="a transactional id")
        resource.add_argument("--cluster", action="store_true", help="the cluster")
        pattern = parser.add_mutually_exclusive_group()
        pattern.add_argument("--prefixed", action="store_true",
                             help="PREFIXED patterns: NAME is a prefix (default LITERAL: the exact name)")
        if filtering:
            pattern.add_argument("--match", action="store_true",
                                 help="every pattern that applies to NAME: literal, * and prefixes")
    remove.add_argument("--all", action="store_true", help="allow a filter that removes every ACL")


def _add_records(sub: argparse._SubParsersAction) -> None:
    produce = _client(sub, "produce", cli_records.produce, "send stdin to a topic, one record per line",
                      description="Send one record per stdin line (without its newline; an empty line is an "
                      "empty value). Lines are bytes: input that is not UTF-8 is sent unchanged.")
    produce.add_argument("topic", help="topic name (it must exist: produce never creates one)")
    produce.add_argument("--key-separator", metavar="SEP",
                         help="split each line at the first SEP into key and value (a line without SEP fails)")
    produce.add_argument("--header", type=_arg(parse_key_value), action="append", default=[], metavar="KEY=VALUE",
                         help="a header on every record; repeatable")
    produce.add_argument("--partition", type=_arg(_non_negative), metavar="N",
                         help="send every record to partition N (default: the client's partitioner)")
    produce.add_argument("--acks", choices=tuple(cli_records.ACKS), default="all",
                         help="all (default): every in-sync replica; 1: the leader; 0: no answer")

    consume = _client(sub, "consume", cli_records.consume, "print a topic's records",
                      output="text: each value on a line (default); json: one object per record",
                      description="Print records until --max-messages or Ctrl-C (exit status 0 either way). "
                      "Text output: each value, as text when it is UTF-8, else base64. JSON output: one object "
                      "per line with topic, partition, offset, timestamp, key, value and headers (and "
                      "key_encoding, value_encoding: utf-8, base64 or null).")
    consume.add_argument("topic", help="topic name")
    consume.add_argument("--group", metavar="G",
                         help="consume as a member of group G, from its committed offsets, committing as it goes")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the log start (with --group: where the group has no committed offset)")
    start.add_argument("--from-time", metavar="TIME", help="start at the first record at or after TIME")
    start.add_argument("--offset", type=_arg(_non_negative), metavar="N", help="start at offset N (held within the log)")
    consume.add_argument("--partition", type=_arg(_non_negative), metavar="N", help="only partition N")
    consume.add_argument("--max-messages", type=_arg(_positive), metavar="N", help="stop after N records")
    consume.add_argument("--key-separator", metavar="SEP", help="text output: print KEY SEP VALUE")
    _isolation(consume)

    query = _client(sub, "query", cli_records.query, "find records by key, message id or time range",
                    description="By key or message id: Gregor's admin HTTP API (--admin; keys are indexed "
                    "unless the topic has key.index.enable=false; the 32 newest hits; --from/--to on the store time). "
                    "By time range (--topic with --from, no --key): the Kafka protocol, on the records' "
                    "timestamps, partition by partition. One JSON object per line.")
    query.add_argument("--admin", metavar="HOST:PORT",
                       help="the broker's admin HTTP API (--admin-port); its admin.token, if set, in $GREGOR_ADMIN_TOKEN")
    query.add_argument("--topic", help="topic to search")
    query.add_argument("--key", help="by key: records with this key (needs --admin)")
    query.add_argument("--msg-id", metavar="ID", help="by message id: the record with this id (needs --admin)")
    query.add_argument("--partition", type=_arg(_non_negative), metavar="N", help="time range: only partition N")
    _isolation(query)
    query.add_argument("--from", dest="time_from", metavar="TIME", help="ISO 8601 (no zone: UTC) or epoch ms")
    query.add_argument("--to", dest="time_to", metavar="TIME",
                       help="ISO 8601 (no zone: UTC) or epoch ms; a time range without it goes to the log end")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _isolation(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"), default="read_committed",
                        help="read_committed (default): records of aborted or open transactions are not shown; "
                             "read_uncommitted: every record, as kafka-console-consumer's default")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gregor", description="Kafka-protocol broker with MetaQ storage, and its operator's "
                     "command line", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("--data-dir", default="gregor-data", help="data directory (default ./gregor-data)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9092, help="port to bind, 0 for any (default 9092)")
    serve.add_argument("--admin-port", type=int, default=None,
                       help="serve the admin HTTP API (web console, lookups, /metrics) on this port of --host; 0 for any")
    serve.add_argument("--config", help="Java-style properties file with broker settings")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one setting; repeatable")
    serve.add_argument("--log-level", default="WARNING", type=str.upper, choices=LOG_LEVELS,
                       help="what the broker logs to stderr: " + ", ".join(LOG_LEVELS) + " (default WARNING)")
    sub.add_parser("settings", help="list every setting with its default")
    cli_users.add_parser(sub)
    _add_topic(sub)
    _add_group(sub)
    _add_acl(sub)
    _add_records(sub)
    cluster = sub.add_parser("cluster", help="the cluster's brokers, controller and id",
                             description="The cluster over the Kafka protocol. `gregor cluster info --help`.")
    _client(cluster.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND"), "info",
                   cli_admin.cluster_info, "brokers, controller and cluster id (DescribeCluster)", output=TABLE_OR_JSON)
    replay = _client(sub, "replay", cli_groups.replay,
                     "deprecated: use `gregor group reset-offsets GROUP --topic T --to-datetime TIME`")
    replay.add_argument("--group", required=True, help="group id")
    replay.add_argument("--topic", required=True, help="topic name")
    replay.add_argument("--to-time", required=True, help="ISO 8601 (no zone: UTC) or epoch milliseconds")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "settings":
        args.run = _print_settings
    return _run_client(args)


def _print_settings(args: argparse.Namespace, out: TextIO) -> int:
    from broker.config import SETTINGS
    from broker.dynamic_configs import APPLIED

    for name, (_, default, text) in sorted(SETTINGS.items()):
        dynamic = " (changes at run time too: docs/operations.md)" if name in APPLIED else ""
        print(f"{name}={default}    # {text}{dynamic}", file=out)
    return 0


def _run_client(args: argparse.Namespace) -> int:
    try:
        return args.run(args, sys.stdout)
    except UsageError as exc:
        print(f"gregor: {exc}", file=sys.stderr)
        return 2
    except CliError as exc:
        print(f"gregor: {exc}", file=sys.stderr)
        return exc.status
    except BrokenPipeError:  # the reader went away (`gregor consume t | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("gregor: interrupted", file=sys.stderr)
        return 130


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    from broker.config import BrokerConfig, ConfigError

    config = BrokerConfig(data_dir=Path(args.data_dir), host=args.host, port=args.port, admin_port=args.admin_port)
    if args.config:
        config.load_properties(Path(args.config))
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        config.set(key.strip(), value)
    config.validate()
    return config


def _serve(args: argparse.Namespace) -> int:
    import faulthandler
    import logging

    import trio

    from broker.config import ConfigError
    from broker.heap import keep_freed_heap
    from store.limits import raise_open_file_limit

    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"gregor: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A fault in a mapping (SIGBUS) or in native code ends the process without a Python
    # traceback; this writes every thread's stack to stderr first, so the log says where.
    faulthandler.enable(file=sys.stderr)
    # every partition keeps a file open: take the hard limit, as the JVM does for Kafka
    open_files = raise_open_file_limit()
    logging.getLogger("gregor").info("open-file limit %d", open_files)
    if not keep_freed_heap():  # request buffers reused instead of faulted in again: broker/heap.py
        logging.getLogger("gregor").info("malloc settings not applied (not glibc): request buffers come from fresh pages")
    try:
        trio.run(_serve_until_signalled, config)
    except BaseException as exc:  # noqa: BLE001 - one line for what stopped the start, else the traceback
        reason = _startup_failure(exc)
        if reason is None:
            raise
        print(f"gregor: cannot start: {reason}", file=sys.stderr)
        return 1
    return 0


def _startup_failure(exc: BaseException) -> str | None:
    """The operator's line for a failed start (broker/server.py's StartupError, a file the store
    cannot open), found inside trio's exception groups; None for anything else (a bug: the
    traceback shows it)."""
    from broker.config import StartupError

    if isinstance(exc, BaseExceptionGroup):
        found = [_startup_failure(e) for e in exc.exceptions]
        return found[0] if len(found) == 1 else None
    if isinstance(exc, StartupError):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename is not None:  # the data directory's files
        return f"{exc.strerror or exc}: {exc.filename}"
    return None


async def _serve_until_signalled(config: BrokerConfig) -> None:
    import trio

    from broker.server import serve

    async def next_signal() -> int:
        async for signum in signals:
            return signum
        raise AssertionError("a signal receiver does not end")

    async def stop_at_next_signal(scope: trio.CancelScope) -> None:
        signum = await next_signal()
        print(f"gregor: {signal.Signals(signum).name} received again, stopping now", file=sys.stderr, flush=True)
        scope.cancel()

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            broker = await nursery.start(serve, config)
            signum = await next_signal()
            print(f"gregor: {signal.Signals(signum).name} received, shutting down", file=sys.stderr, flush=True)
            topology = broker.topology
            if topology.hands_over and config["controlled.shutdown.enable"]:
                # a master first drains: its sync-state set gets all it wrote (Cluster.drain)
                print("gregor: this node is its group's master: it takes no more writes and hands over once "
                      "its sync-state set holds all it wrote (a second signal stops it at once)",
                      file=sys.stderr, flush=True)
                async with trio.open_nursery() as draining:
                    draining.start_soon(stop_at_next_signal, draining.cancel_scope)
                    await topology.drain()
                    draining.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
