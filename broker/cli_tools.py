"""Client-side commands: `gregor topic create-view`, `gregor query` and `gregor replay`.

They run outside the broker. create-view and replay speak only the Kafka
protocol (kafka-python's admin client), so replay also works against Apache
Kafka; query calls the broker's admin HTTP API. Each returns a process exit
status and prints errors as one line on stderr.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import TextIO
from urllib.parse import urlencode

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, OffsetTimestamp
from kafka.errors import KafkaError

EMPTY_GROUP_STATES = ("Empty", "Dead")


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds from digits, or from ISO 8601 (no zone means UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected an ISO 8601 time or epoch milliseconds, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _fail(message: str) -> int:
    print(f"gregor: {message}", file=sys.stderr)
    return 1


def create_view(bootstrap: str, name: str, source: str, tags: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gregor-cli")
    try:
        admin.create_topics({name: {"num_partitions": -1, "replication_factor": -1,
                                    "configs": {"view.source": source, "view.tags": tags}}})
    except KafkaError as exc:
        return _fail(f"cannot create view {name}: {_kafka_message(exc)}")
    finally:
        admin.close()
    print(f"created view {name} of {source} for tags {tags}")
    return 0


def _kafka_message(exc: KafkaError) -> str:
    text = str(exc)
    marker = "error_message="
    if marker in text:  # kafka-python puts the whole response in the message; keep the broker's reason
        reason = text.split(marker, 1)[1]
        return reason[1:reason.find(reason[0], 1)] if reason[:1] in "'\"" else reason
    return text


def query(admin: str, out: TextIO, *, topic: str | None = None, key: str | None = None,
          time_from: str | None = None, time_to: str | None = None, msg_id: str | None = None) -> int:
    """Print each message the admin API finds, one JSON object per line."""
    if msg_id is not None:
        params = {"msg_id": msg_id}
    else:
        params = {"topic": topic, "key": key}
        if time_from:
            params["from"] = str(parse_time_ms(time_from))
        if time_to:
            params["to"] = str(parse_time_ms(time_to))
    url = f"http://{admin}/v1/messages?{urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            reason = json.load(exc).get("error", exc.reason)
        except ValueError:
            reason = exc.reason
        return _fail(f"query failed ({exc.code}): {reason}")
    except (urllib.error.URLError, OSError) as exc:
        return _fail(f"cannot reach the admin API at {admin}: {exc}")
    out.writelines(json.dumps(message, ensure_ascii=False) + "\n" for message in body["messages"])
    return 0


def replay(bootstrap: str, group: str, topic: str, to_time_ms: int, out: TextIO) -> int:
    """Reset `group`'s committed offsets on every partition of `topic` to the first offset at or
    after `to_time_ms` (the log end where there is none, as kafka-consumer-groups --to-datetime)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gregor-replay")
    try:
        described = admin.describe_groups([group])[group]
        if described.get("error"):
            return _fail(f"cannot describe group {group}: {described['error']}")
        members = described.get("members") or []
        if members or described.get("group_state") not in EMPTY_GROUP_STATES:
            return _fail(f"group {group} has {len(members)} active member(s) (state "
                         f"{described.get('group_state')}); stop its consumers first")
        topics = admin.describe_topics([topic])
        if not topics or topics[0].get("error_code"):
            return _fail(f"unknown topic {topic}")
        partitions = sorted(p["partition_index"] for p in topics[0]["partitions"])
        tps = [TopicPartition(topic, p) for p in partitions]
        old = admin.list_group_offsets({group: tps}).get(group, {})
        result = admin.reset_group_offsets(group, {tp: OffsetTimestamp(to_time_ms) for tp in tps})
    except KafkaError as exc:
        return _fail(f"replay of {group} on {topic} failed: {_kafka_message(exc)}")
    finally:
        admin.close()
    status = 0
    for tp in tps:
        before = old.get(tp)
        before_text = str(before.offset) if before is not None and before.offset >= 0 else "none"
        outcome = result[tp]
        error = outcome["error"]
        if error is not None and getattr(error, "errno", 0):
            status = 1
            out.write(f"{topic}-{tp.partition}: {before_text} -> failed: {error.__name__}\n")
        else:
            out.write(f"{topic}-{tp.partition}: {before_text} -> {outcome['offset']}\n")
    return status
