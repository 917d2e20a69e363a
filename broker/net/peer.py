"""What a handler knows of the connection whose request it answers, set once per connection
task (context variables, so handlers need no extra argument): the client address (group
members report it as client_host, formatted as Kafka does: "/<ip>"), the listener it came in
on (Metadata names that listener's advertised address), its SASL session, if any, and the
subject of a TLS client's certificate. `principal()` is who ACLs judge (broker/security/acl.py)."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.net.listeners import Listener, SaslSession

peer_host: contextvars.ContextVar[str] = contextvars.ContextVar("peer_host", default="")
listener: contextvars.ContextVar[Listener | None] = contextvars.ContextVar("listener", default=None)
sasl_session: contextvars.ContextVar[SaslSession | None] = contextvars.ContextVar("sasl_session", default=None)
tls_subject: contextvars.ContextVar[str | None] = contextvars.ContextVar("tls_subject", default=None)
# another node of the cluster, over the replication port (broker/cluster/inter_broker.py): ACLs do not apply
node: contextvars.ContextVar[bool] = contextvars.ContextVar("node", default=False)
# the web console's actions (broker/console/actions.py): the principal they run as (admin.principal)
acting: contextvars.ContextVar[str | None] = contextvars.ContextVar("acting", default=None)

ANONYMOUS = "User:ANONYMOUS"


def principal() -> str:
    """Kafka's principal of this connection: the SASL user on SASL listeners, the certificate's
    subject on SSL listeners (ANONYMOUS without a certificate), ANONYMOUS on PLAINTEXT; for the
    web console's actions, the principal they run as (admin.principal)."""
    console = acting.get()
    if console is not None:
        return console
    session = sasl_session.get()
    if session is not None:
        return f"User:{session.user}" if session.user is not None else ANONYMOUS
    subject = tls_subject.get()
    return f"User:{subject}" if subject else ANONYMOUS


def client_ip() -> str:
    return peer_host.get().removeprefix("/")
