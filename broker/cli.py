"""`gregor` command line: `gregor serve [--data-dir DIR] [--host H] [--port P]
[--config FILE] [--set KEY=VALUE ...]`. Bad arguments or settings print one
plain line and exit with status 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from broker.config import SETTINGS, BrokerConfig, ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gregor", description="Kafka-protocol broker with MetaQ storage")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("--data-dir", default="gregor-data", help="data directory (default ./gregor-data)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9092, help="port to bind, 0 for any (default 9092)")
    serve.add_argument("--config", help="Java-style properties file with broker settings")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one setting; repeatable")
    serve.add_argument("--log-level", default="WARNING")
    sub.add_parser("settings", help="list every setting with its default")
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig(data_dir=Path(args.data_dir), host=args.host, port=args.port)
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
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"gregor: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        trio.run(_serve_until_signalled, config)
    except OSError as exc:
        print(f"gregor: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


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
