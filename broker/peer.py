"""The client address of the request being handled, set once per connection task
(a context variable, so handlers need no extra argument). Group members report it
as client_host, formatted as Kafka does: "/<ip>"."""

import contextvars

peer_host: contextvars.ContextVar[str] = contextvars.ContextVar("peer_host", default="")
