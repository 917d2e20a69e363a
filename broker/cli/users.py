"""`gregor user add|delete|list --data-dir DIR`: SCRAM credentials written straight into a
stopped broker's data directory (Kafka's `kafka-storage format --add-scram`), so SASL clients
can log in at the first start. The credential is salted (broker/security/sasl.py); the password is
never stored. A running broker holds the data directory: the command then refuses in one line
and points to AlterUserScramCredentials (`kafka-configs --alter --add-config
'SCRAM-SHA-256=[password=...]' --entity-type users --entity-name NAME`)."""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from broker.cli.connect import CliError
from broker.security.sasl import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    decode_credential,
    encode_credential,
    new_credential,
)

if TYPE_CHECKING:
    from store import Store

# The store (numpy, the commitlog) is imported by the commands that open one, not by every
# `gregor` command's parser: every command started in 1.2 s with it, 0.5 s without.


def add_parser(sub) -> None:
    user = sub.add_parser("user", help="SCRAM users of SASL listeners, in a stopped broker's data dir",
                          description=__doc__.split("\n\n")[0])
    cmds = user.add_subparsers(dest="user_command", required=True, metavar="COMMAND")
    add = cmds.add_parser("add", help="add a user, or change its password")
    add.add_argument("name")
    add.add_argument("--password", required=True)
    add.add_argument("--mechanism", default="SCRAM-SHA-256", choices=sorted(MECHANISM_CODES))
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    add.set_defaults(run=add_user)
    delete = cmds.add_parser("delete", help="remove a user's credential for one mechanism")
    delete.add_argument("name")
    delete.add_argument("--mechanism", default="SCRAM-SHA-256", choices=sorted(MECHANISM_CODES))
    delete.set_defaults(run=delete_user)
    listing = cmds.add_parser("list", help="users and their mechanisms (never a password)")
    listing.set_defaults(run=list_users)
    for p in (add, delete, listing):
        p.add_argument("--data-dir", required=True, help="the broker's data directory (the broker stopped)")


def _open(data_dir: str) -> closing[Store]:
    """The store, for a `with` block that closes it (and releases the data dir's .lock)."""
    from broker.config import BrokerConfig
    from store import Store, StoreError

    try:
        return closing(Store.open(Path(data_dir), BrokerConfig(data_dir=Path(data_dir)).store_config()))
    except StoreError as exc:
        raise CliError(f"cannot open {data_dir}: {exc}") from None


def add_user(args: argparse.Namespace, out: TextIO) -> int:
    if not args.name:
        raise CliError("user add: the user name must not be empty")
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise CliError(f"user add: --iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}, as Kafka requires")
    from store.state import credential_key

    credential = new_credential(args.mechanism, args.password, args.iterations)
    with _open(args.data_dir) as store:
        store.write_state([(credential_key(MECHANISM_CODES[args.mechanism], args.name), encode_credential(credential))])
    out.write(f"user {args.name}: {args.mechanism} credential stored ({args.iterations} iterations)\n")
    return 0


def delete_user(args: argparse.Namespace, out: TextIO) -> int:
    from store.state import credential_key

    with _open(args.data_dir) as store:
        key = credential_key(MECHANISM_CODES[args.mechanism], args.name)
        if store.state_value(key) is None:
            raise CliError(f"user delete: {args.name} has no {args.mechanism} credential")
        store.write_state([(key, None)])
    out.write(f"user {args.name}: {args.mechanism} credential removed\n")
    return 0


def list_users(args: argparse.Namespace, out: TextIO) -> int:
    from store.state import CREDENTIAL

    with _open(args.data_dir) as store:
        rows = sorted((key[2:].decode(), MECHANISM_NAMES[key[1]], decode_credential(MECHANISM_NAMES[key[1]], value).iterations)
                      for key, value in store.state_items(CREDENTIAL) if key[1] in MECHANISM_NAMES)
    out.writelines(f"{name}\t{mechanism}\titerations={iterations}\n" for name, mechanism, iterations in rows)
    return 0
