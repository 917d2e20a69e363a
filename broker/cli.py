"""`gregor` command line: `gregor serve [--data-dir DIR] [--host H] [--port P]
[--admin-port P] [--config FILE] [--set KEY=VALUE ...]`, `gregor settings`, and
the client commands `gregor topic create-view`, `gregor query`, `gregor replay`
(broker/cli_tools.py). Bad arguments or settings print one plain line and exit
with status 2.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
from pathlib import Path

import trio

from broker.config import SETTINGS, BrokerConfig, ConfigError
from store.limits import raise_open_file_limit


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gregor", description="Kafka-protocol broker with MetaQ storage")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("--data-dir", default="gregor-data", help="data directory (default ./gregor-data)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9092, help="port to bind, 0 for any (default 9092)")
    serve.add_argument("--admin-port", type=int, default=None,
                       help="serve the admin HTTP API (lookups, /metrics) on this port of --host; 0 for any")
    serve.add_argument("--config", help="Java-style properties file with broker settings")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one setting; repeatable")
    serve.add_argument("--log-level", default="WARNING")
    sub.add_parser("settings", help="list every setting with its default")
    topic = sub.add_parser("topic", help="topic administration through the Kafka protocol")
    topic_sub = topic.add_subparsers(dest="topic_command", required=True)
    view = topic_sub.add_parser("create-view", help="create a tag-filtered, read-only view of a topic")
    view.add_argument("name")
    view.add_argument("--source", required=True, help="source topic (must have tag.header set)")
    view.add_argument("--tags", required=True, help="comma-separated tags the view lets through")
    view.add_argument("--bootstrap", default="127.0.0.1:9092", help="HOST:PORT of a broker")
    query = sub.add_parser("query", help="find messages by key or message id (admin HTTP API)")
    query.add_argument("--admin", required=True, help="HOST:PORT of the broker's --admin-port")
    query.add_argument("--topic")
    query.add_argument("--key")
    query.add_argument("--from", dest="time_from", help="ISO 8601 or epoch ms (store time)")
    query.add_argument("--to", dest="time_to", help="ISO 8601 or epoch ms (store time)")
    query.add_argument("--msg-id")
    replay = sub.add_parser("replay", help="reset a stopped group's offsets on a topic to a time")
    replay.add_argument("--bootstrap", required=True, help="HOST:PORT of a broker (Gregor or Kafka)")
    replay.add_argument("--group", required=True)
    replay.add_argument("--topic", required=True)
    replay.add_argument("--to-time", required=True, help="ISO 8601 (no zone: UTC) or epoch milliseconds")
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "settings":
        for name, (_, default, text) in sorted(SETTINGS.items()):
            print(f"{name}={default}    # {text}")
        return 0
    if args.command in ("topic", "query", "replay"):
        return _client_command(args)
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
    try:
        trio.run(_serve_until_signalled, config)
    except OSError as exc:
        print(f"gregor: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


def _client_command(args: argparse.Namespace) -> int:
    from broker import cli_tools

    if args.command == "topic":
        return cli_tools.create_view(args.bootstrap, args.name, args.source, args.tags)
    try:
        if args.command == "query":
            if (args.msg_id is None) == (args.topic is None or args.key is None):
                raise ValueError("give either --msg-id ID, or --topic T with --key K")
            return cli_tools.query(args.admin, sys.stdout, topic=args.topic, key=args.key,
                                   time_from=args.time_from, time_to=args.time_to, msg_id=args.msg_id)
        return cli_tools.replay(args.bootstrap, args.group, args.topic, cli_tools.parse_time_ms(args.to_time),
                                sys.stdout)
    except ValueError as exc:
        print(f"gregor: {exc}", file=sys.stderr)
        return 2


async def _serve_until_signalled(config: BrokerConfig) -> None:
    from broker.server import serve

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, config)
            async for signum in signals:
                print(f"gregor: {signal.Signals(signum).name} received, shutting down", file=sys.stderr,
                      flush=True)
                nursery.cancel_scope.cancel()
                break
