"""What the `gregor` client commands parse and print, with no I/O: times, durations, `K=V`
arguments, bootstrap addresses, Java properties, aligned tables, and the offsets a group reset
moves to.

Kept apart from the commands so that every rule here is tested with plain values; nothing
here opens a socket or writes to a stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


class UsageError(ValueError):
    """A bad argument: the command prints it as one line and exits with status 2."""


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds from digits, or from ISO 8601 (no zone means UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"expected an ISO 8601 time or epoch milliseconds, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """Milliseconds in an ISO 8601 duration as Kafka's --by-duration takes it (Java's
    Duration.parse: PnDTnHnMn.nS, e.g. PT10M, P1DT12H)."""
    match = _DURATION.fullmatch(text.strip())
    if not match or not any(match.groups()) or text.strip().upper().endswith("T"):
        raise UsageError(f"expected an ISO 8601 duration such as PT10M or P1DT2H, got {text!r}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_key_value(text: str) -> tuple[str, str]:
    """`K=V` (the value may be empty or hold more `=`); anything without `=` is a usage error."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """HOST:PORT[,HOST:PORT...] as (host, port) pairs."""
    servers = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--bootstrap expects HOST:PORT, got {item.strip()!r}")
        servers.append((host.strip("[]"), int(port)))
    return servers


def parse_properties(text: str) -> dict[str, str]:
    """Java properties as Kafka's tools read a --command-config file: `KEY=VALUE` or `KEY: VALUE`
    lines, `#` and `!` comments, a line ending in a backslash continued on the next."""
    found: dict[str, str] = {}
    lines = iter(enumerate(text.splitlines(), 1))
    for number, line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\"):
            line = line[:-1] + next(lines, (0, ""))[1].lstrip()
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise UsageError(f"line {number}: expected KEY=VALUE, got {line!r}")
        found[line[:sep].strip()] = line[sep + 1:].strip()
    return found


def parse_topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """`TOPIC` or `TOPIC:0,2` (kafka-consumer-groups' --topic form): the topic and its partitions
    (None: all of them)."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise UsageError(f"expected TOPIC or TOPIC:PARTITION,..., got {text!r}")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in partitions.split(",")})
    except ValueError:
        raise UsageError(f"expected TOPIC:PARTITION,... with numbers, got {text!r}") from None


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned, left-justified table with upper-case headers, as Kafka's tools print; None is `-`."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in cells)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """`NAME  value` lines, aligned: the head of a describe."""
    width = max(len(name) for name, _ in pairs)
    return "".join(f"{name.ljust(width)}  {'-' if value is None else value}\n" for name, value in pairs)


def as_json(data: Any) -> str:
    """One line of JSON, as `--output json` prints it (jq pretty-prints it if wanted)."""
    return json.dumps(data, ensure_ascii=False) + "\n"


def node_list(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


@dataclass(frozen=True)
class OffsetMove:
    """One partition of a group reset: where the group was (None: no committed offset), where
    it goes."""

    topic: str
    partition: int
    old_offset: int | None
    new_offset: int


def reset_target(found: int | None, earliest: int, latest: int) -> int:
    """Where a reset lands, as kafka-consumer-groups decides: within [log start, log end]; a time
    with no record at or after it (found None or -1) goes to the log end."""
    if found is None or found < 0 or found > latest:
        return latest
    return max(found, earliest)


def reset_plan(targets: Mapping[tuple[str, int], int | None], earliest: Mapping[tuple[str, int], int],
               latest: Mapping[tuple[str, int], int],
               committed: Mapping[tuple[str, int], int]) -> list[OffsetMove]:
    """The moves of a reset, by topic and partition; `targets` holds the offset each partition
    was asked to go to (None where a time lookup found nothing)."""
    return [OffsetMove(topic, partition, committed.get((topic, partition)),
                       reset_target(targets[(topic, partition)], earliest[(topic, partition)],
                                    latest[(topic, partition)]))
            for topic, partition in sorted(targets)]


def lag(current: int | None, log_end: int | None) -> int | None:
    """Records the group has not consumed; unknown (None) without a committed offset."""
    if current is None or current < 0 or log_end is None:
        return None
    return max(log_end - current, 0)
