"""A listener's certificate changed while the broker runs: Kafka's dynamic broker configs for SSL
(KIP-226), set with IncrementalAlterConfigs or AlterConfigs on one broker (resource BROKER, its
node id), as `kafka-configs --entity-type brokers --entity-name 1 --alter --add-config
listener.name.ssl.ssl.keystore.location=/etc/gregor/new.pem` does.

- The names take the listener prefix, as in Kafka: `listener.name.<listener>.` + one of
  DYNAMIC; the unprefixed `ssl.*` names are refused with Kafka's INVALID_REQUEST. Gregor's
  replication port, not a listener, is `listener.name.replication.`: the certificate a node
  shows on both ends of it (docs/replication.md, Security between nodes).
- A change is checked before it is kept, as Kafka checks it: the new files must load, and the
  new certificate must name the same subject and the same subjectAltNames as the one served now,
  unless ssl.allow.dn.changes / ssl.allow.san.changes (KIP-978). Otherwise INVALID_REQUEST, and
  the listener goes on with its certificate.
- A kept change is a state record in the commitlog (store/state.py BROKER_CONFIG: node id and
  name), so it outlives a restart, and in a cluster reaches ZooKeeper and every broker group as
  ACLs do (broker/cluster/security.py). New connections get the new certificate at once; open
  ones keep theirs.
- Setting the path a listener already uses reads the file again (a certificate renewed in place).
  Kafka 3.9 in KRaft mode takes such a request and does not reload (KIP-687's reason for a file
  watcher); Kafka in ZooKeeper mode did.

No I/O on the network here; loading the files is the caller's work in a worker thread only if it
wants to (they are small PEM files, read as Python's ssl reads them at start).
"""

from __future__ import annotations

import logging
import ssl
import struct
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from broker.net.listeners import ListenerError, tls_context
from store.state import BROKER_CONFIG

log = logging.getLogger("gregor.tls")
T = TypeVar("T")
PREFIX = "listener.name."
DYNAMIC = ("ssl.keystore.location", "ssl.key.password", "ssl.truststore.location")
REPLICATION = "replication"  # the replication port's pseudo-listener name
_NODE = struct.Struct(">i")


def split(name: str) -> tuple[str, str] | None:
    """(listener, setting) of `listener.name.<listener>.<setting>`, the listener in lower case; None otherwise."""
    if not name.startswith(PREFIX):
        return None
    rest = name[len(PREFIX):]
    for setting in DYNAMIC:
        if rest.endswith("." + setting) and len(rest) > len(setting) + 1:
            return rest[:-len(setting) - 1].lower(), setting
    return None


def state_key(node: int, name: str) -> bytes:
    return BROKER_CONFIG + _NODE.pack(node) + name.encode()


def node_of(key: bytes) -> tuple[int, str]:
    return _NODE.unpack_from(key, 1)[0], key[1 + _NODE.size:].decode()


def stored(items: list[tuple[bytes, bytes]], node: int) -> dict[str, str]:
    """This node's dynamic settings among the state records `items` (Store.state_items(BROKER_CONFIG))."""
    found = {}
    for key, value in items:
        owner, name = node_of(key)
        if owner == node:
            found[name] = value.decode()
    return found


def effective(values: Mapping[str, Any], dynamic: Mapping[str, str], listener: str) -> dict[str, Any]:
    """The broker's settings as `listener` uses them: its dynamic ones over the static ones."""
    out = dict(values)
    for name, value in dynamic.items():
        found = split(name)
        if found is not None and found[0] == listener.lower():
            out[found[1]] = value
    return out


def built_at_start(build: Callable[[Mapping[str, Any]], T], settings: Mapping[str, Any],
                   static: Mapping[str, Any], what: str) -> tuple[T, Mapping[str, Any]]:
    """`build(settings)` as the broker starts, and the settings it used: when `settings` hold a
    dynamic change whose files no longer load (one deleted, say), `build(static)` with a warning,
    as Kafka starts when a dynamic config fails. ListenerError when the static ones fail too."""
    try:
        return build(settings), settings
    except ListenerError as exc:
        if settings == static:
            raise
        log.warning("%s starts on its static TLS settings: its dynamic ones do not load (%s)", what, exc)
        return build(static), static


def certificate(path: str) -> dict:
    """The first certificate of a PEM keystore, as ssl's getpeercert() gives one; {} if none is readable.
    ssl._ssl._test_decode_cert is CPython's own PEM decoder (what the ssl tests use): the standard
    library has no public way to read a certificate file, and this avoids a dependency for it."""
    try:
        return ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]
    except (OSError, ssl.SSLError, ValueError):
        return {}


def _dn(cert: dict) -> str:
    return ", ".join("+".join(f"{k}={v}" for k, v in rdn) for rdn in reversed(cert.get("subject", ())))


def change_problem(served: dict, new: Mapping[str, Any], allow_dn: bool, allow_san: bool) -> str | None:
    """Kafka's INVALID_REQUEST message for a listener's new TLS settings, or None when they may be
    used: the files load, and the new certificate keeps the subject and the subjectAltNames of
    `served` (the certificate the listener serves now, read when it was loaded)."""
    try:
        tls_context(new, client_auth="none")
    except ListenerError as exc:
        return f"Validation of dynamic config update of SSLFactory failed: {exc}"
    fresh = certificate(new["ssl.keystore.location"])
    if not allow_dn and served and _dn(served) != _dn(fresh):
        return ("Validation of dynamic config update of SSLFactory failed: Keystore DistinguishedName does not "
                f"match: existing={{DN={_dn(served)}}}, new={{DN={_dn(fresh)}}} (ssl.allow.dn.changes=true "
                "allows it)")
    old_names, new_names = sorted(served.get("subjectAltName", ())), sorted(fresh.get("subjectAltName", ()))
    if not allow_san and served and old_names != new_names:
        return ("Validation of dynamic config update of SSLFactory failed: Keystore SubjectAltName does not match: "
                f"existing={old_names}, new={new_names} (ssl.allow.san.changes=true allows it)")
    return None
