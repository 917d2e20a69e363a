"""What a handler knows of the connection whose request it answers, set once per connection
task (context variables, so handlers need no extra argument): the client address (group
members report it as client_host, formatted as Kafka does: "/<ip>"), the listener it came in
on (Metadata names that listener's advertised address), and its SASL session, if any."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.listeners import Listener, SaslSession

peer_host: contextvars.ContextVar[str] = contextvars.ContextVar("peer_host", default="")
listener: contextvars.ContextVar[Listener | None] = contextvars.ContextVar("listener", default=None)
sasl_session: contextvars.ContextVar[SaslSession | None] = contextvars.ContextVar("sasl_session", default=None)
