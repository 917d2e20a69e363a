"""How a record's bytes are shown as JSON, by the admin HTTP API, `gregor query` and `gregor consume`.

Keys, values and header values are bytes in Kafka. They are printed as text when
they are UTF-8 and as base64 otherwise, with an `*_encoding` field saying which,
so JSON output stays valid and loses nothing. One definition, so every command
prints the same message the same way.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any


def text_or_base64(data: bytes | None) -> tuple[str | None, str]:
    """(text, encoding): "utf-8" text, else "base64", or (None, "null") for a null key or value."""
    if data is None:
        return None, "null"
    try:
        return bytes(data).decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode(), "base64"


def record_json(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
                value: bytes | None, headers: Iterable[tuple[str, bytes | None]]) -> dict[str, Any]:
    """One record as a JSON object: topic, partition, offset, timestamp (epoch ms), key,
    key_encoding, value, value_encoding, headers (a list of {key, value, encoding})."""
    key_text, key_encoding = text_or_base64(key)
    value_text, value_encoding = text_or_base64(value)
    shown = []
    for name, raw in headers:
        text, encoding = text_or_base64(raw)
        shown.append({"key": name, "value": text, "encoding": encoding})
    return {"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp,
            "key": key_text, "key_encoding": key_encoding, "value": value_text, "value_encoding": value_encoding,
            "headers": shown}
