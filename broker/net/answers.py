"""What a handler may return instead of a response body, for the connection loop
(broker/net/connection.py) to act on: an answer sent later, an answer after which the connection
closes, or no answer and a closed connection. Handlers subclass these (a produce's group commit,
a failed SASL login, a failed acks=0 produce); the connection knows no handler's types."""

from __future__ import annotations

from typing import Any


class Deferred:
    """An answer sent in request order once `wait()` returns, its `body` encoded then; the
    connection keeps reading the requests behind it meanwhile (Kafka's delayed operations)."""

    __slots__ = ()
    body: Any

    async def wait(self) -> None:
        raise NotImplementedError


class CloseAfter:
    """An answer (`body`) after which the connection closes; `body` None: it closes at once."""

    __slots__ = ()
    body: Any


class CloseUnanswered:
    """No answer is due, and the connection closes; str() says why, for the log."""

    __slots__ = ()
