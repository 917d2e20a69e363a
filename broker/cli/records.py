"""`gregor produce`, `gregor consume` and `gregor query`: records in and out.

produce and consume, and query by time range, speak only the Kafka protocol (Produce, Fetch,
ListOffsets by time, the group protocol), so they work against Apache Kafka too. Query by key or
message id asks Gregor's admin HTTP API, which has the key index (docs/extensions.md).

Keys and values are bytes: produce sends each stdin line's bytes as they are (no decoding, so
input that is not UTF-8 is sent unchanged), and consume and query print them as text when they
are UTF-8 and as base64 otherwise (protocol/record_text.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, TextIO
from urllib.parse import urlencode

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from broker.cli.connect import (
    REQUEST_TIMEOUT_MS,
    CliError,
    admin_client,
    consumer_client,
    kafka_errors,
    producer_client,
    security,
    topic_partitions,
)
from broker.cli.format import UsageError, parse_time_ms
from protocol.record_text import record_json, text_or_base64

ADMIN_TOKEN_VARIABLE = "GREGOR_ADMIN_TOKEN"  # the broker's admin.token, for lookups through the admin API

ACKS = {"all": "all", "1": 1, "0": 0}
POLL_MS = 200  # how often a consume notices Ctrl-C
SETTLE_EVERY = 1000  # produce checks its sent records' outcomes this often, to stop at the first failure


def produce(args: argparse.Namespace, out: TextIO, stdin: BinaryIO | None = None) -> int:
    """One record per stdin line (the `\\n` is not part of it; an empty line is an empty value);
    with --key-separator the line is KEY SEP VALUE, split at the first SEP. Prints nothing."""
    stdin = sys.stdin.buffer if stdin is None else stdin
    separator = os.fsencode(args.key_separator) if args.key_separator is not None else None
    if separator == b"":
        raise UsageError("--key-separator must not be empty")
    headers = [(name, os.fsencode(value)) for name, value in args.header]
    _partitions_of(args.bootstrap, args.topic, args.partition, args.command_config)
    producer = producer_client(args.bootstrap, acks=ACKS[args.acks], linger_ms=5, **security(args))
    pending = []
    try:
        with kafka_errors(f"produce to {args.topic}"):
            for number, line in enumerate(stdin, 1):
                key, value = _split_line(line, separator, number)
                pending.append(producer.send(args.topic, key=key, value=value, headers=headers,
                                             partition=args.partition))
                if len(pending) >= SETTLE_EVERY:
                    pending = [f for f in pending if not _settled(f)]
            producer.flush()
            for future in pending:
                future.get()
    finally:
        producer.close()
    return 0


def _split_line(line: bytes, separator: bytes | None, number: int) -> tuple[bytes | None, bytes]:
    line = line[:-1] if line.endswith(b"\n") else line
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise CliError(f"line {number} has no key separator {separator.decode(errors='replace')!r}; "
                       "the lines before it were sent")
    return key, value


def _settled(future) -> bool:
    """Whether a send finished; a failed one raises its error."""
    if future.is_done and future.exception is not None:
        raise future.exception
    return future.is_done


def _partitions_of(bootstrap: str, topic: str, partition: int | None, config_file: str | None) -> list[int]:
    """The topic's partitions, checked first: a producer or consumer would wait for an unknown topic."""
    with admin_client(bootstrap, config_file) as admin:
        partitions = topic_partitions(admin, topic)
    if partition is not None and partition not in partitions:
        raise CliError(f"topic {topic} has no partition {partition} (it has {len(partitions)})")
    return partitions


class _StopOnSignal:
    """Ctrl-C (SIGINT) or SIGTERM asks a consume to stop after the poll in progress, so it closes
    its consumer (committing a group's position) instead of dying with a traceback."""

    def __init__(self) -> None:
        self.stopped = False

    def __call__(self, signum: int, frame: object) -> None:
        self.stopped = True

    @contextmanager
    def installed(self) -> Iterator[_StopOnSignal]:
        previous = {sig: signal.signal(sig, self) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def consume(args: argparse.Namespace, out: TextIO) -> int:
    """Print records until --max-messages, or Ctrl-C (exit status 0 either way)."""
    if args.group and (args.partition is not None or args.offset is not None or args.from_time):
        raise UsageError("--group cannot be combined with --partition, --offset or --from-time; "
                         "move the group with `gregor group reset-offsets` first")
    start_ms = max(parse_time_ms(args.from_time), 0) if args.from_time else None  # before 1970: the start
    partitions = _partitions_of(args.bootstrap, args.topic, args.partition, args.command_config)
    with _StopOnSignal().installed() as stop:
        if args.group:
            consumer = consumer_client(args.bootstrap, group_id=args.group,
                                       auto_offset_reset="earliest" if args.from_beginning else "latest",
                                       isolation_level=args.isolation_level, **security(args))
        else:
            consumer = consumer_client(args.bootstrap, group_id=None, enable_auto_commit=False,
                                       isolation_level=args.isolation_level, **security(args))
        try:
            with kafka_errors(f"consume from {args.topic}"):
                if args.group:
                    # The topic's partitions known before joining: kafka-python 3.0.12, as the leader of a
                    # group it joined before its first metadata answer, assigns nothing and can then
                    # poll without ever fetching (seen against Kafka 3.9; compat_tests' harness does
                    # the same)
                    consumer.partitions_for_topic(args.topic)
                    if not args.from_beginning and all(consumer.committed(TopicPartition(args.topic, p)) is None
                                                       for p in partitions):
                        print(f"gregor: group {args.group} has no committed offsets on {args.topic}: it starts at "
                              "the log end (--from-beginning reads from the start)", file=sys.stderr)
                    consumer.subscribe([args.topic])
                else:
                    _assign_and_seek(consumer, args, partitions, start_ms)
                _print_records(consumer, args, out, stop)
        finally:
            consumer.close()
    return 0


def _assign_and_seek(consumer: KafkaConsumer, args: argparse.Namespace, partitions: list[int],
                     start_ms: int | None) -> None:
    """Without a group: the chosen partitions from the chosen start (by default the log end, new
    records only, as kafka-console-consumer); an --offset is held within [log start, log end]."""
    tps = [TopicPartition(args.topic, p) for p in ([args.partition] if args.partition is not None else partitions)]
    consumer.assign(tps)
    if args.from_beginning:
        consumer.seek_to_beginning(*tps)
    elif args.offset is not None:
        start, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, min(max(args.offset, start[tp]), end[tp]))
    elif start_ms is not None:
        found = consumer.offsets_for_times(dict.fromkeys(tps, start_ms))
        for tp in tps:
            if found.get(tp) is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found[tp].offset)
    else:
        consumer.seek_to_end(*tps)


def _print_records(consumer: KafkaConsumer, args: argparse.Namespace, out: TextIO, stop: _StopOnSignal) -> None:
    printed = 0
    while not stop.stopped and (args.max_messages is None or printed < args.max_messages):
        left = None if args.max_messages is None else args.max_messages - printed
        batches = consumer.poll(timeout_ms=POLL_MS, max_records=left)
        for tp in sorted(batches):
            for record in batches[tp]:
                out.write(_shown(record, args.output, args.key_separator))
                printed += 1
        out.flush()


def _shown(record: ConsumerRecord, output: str, key_separator: str | None) -> str:
    """A JSON line, or the value (UTF-8 text, else base64; `null` for none), after KEY SEP with
    --key-separator."""
    if output == "json":
        return json.dumps(_json(record), ensure_ascii=False) + "\n"
    value = text_or_base64(record.value)[0]
    line = "null" if value is None else value
    if key_separator is not None:
        key = text_or_base64(record.key)[0]
        line = f"{'null' if key is None else key}{key_separator}{line}"
    return line + "\n"


def _json(record: ConsumerRecord) -> dict:
    return record_json(record.topic, record.partition, record.offset, record.timestamp, record.key, record.value,
                       record.headers or [])


def query(args: argparse.Namespace, out: TextIO) -> int:
    """By message id or key through the admin HTTP API; by time range through the Kafka protocol."""
    if args.msg_id is not None and (args.topic or args.key is not None):
        raise UsageError("--msg-id takes no --topic or --key")
    if args.msg_id is None and (args.topic is None or (args.key is None and args.time_from is None)):
        raise UsageError("give --msg-id ID, --topic T --key K, or --topic T --from TIME [--to TIME]")
    if args.msg_id is not None or args.key is not None:
        return _lookup(args, out)
    return _time_range(args, out)


def _lookup(args: argparse.Namespace, out: TextIO) -> int:
    """Print each message the admin API finds, one JSON object per line."""
    if not args.admin:
        raise UsageError("lookups by --key or --msg-id need --admin HOST:PORT (the broker's --admin-port)")
    if args.msg_id is not None:
        params = {"msg_id": args.msg_id}
    else:
        key = os.fsencode(args.key)  # a key given in bytes that are not UTF-8 goes as key_b64
        encoded, encoding = text_or_base64(key)
        params = {"topic": args.topic, ("key" if encoding == "utf-8" else "key_b64"): encoded}
        if args.time_from:
            params["from"] = str(parse_time_ms(args.time_from))
        if args.time_to:
            params["to"] = str(parse_time_ms(args.time_to))
    request = urllib.request.Request(f"http://{args.admin}/v1/messages?{urlencode(params)}")
    token = os.environ.get(ADMIN_TOKEN_VARIABLE)
    if token:  # from the environment, not an argument: other users can read a command line
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_MS / 1000) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            reason = json.load(exc).get("error", exc.reason)
        except ValueError:
            reason = exc.reason
        if exc.code == 401:
            reason += f" (give it in ${ADMIN_TOKEN_VARIABLE})"
        raise CliError(f"query failed ({exc.code}): {reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"cannot reach the admin API at {args.admin}: {exc}") from None
    out.writelines(json.dumps(message, ensure_ascii=False) + "\n" for message in body["messages"])
    if not body["messages"]:
        _no_records()
    return 0


def _no_records() -> None:
    """A query that matched nothing says so on stderr (stdout stays empty for scripts); status 0."""
    print("gregor: no records match", file=sys.stderr)


def _time_range(args: argparse.Namespace, out: TextIO) -> int:
    """Records whose timestamp is within [--from, --to] (--to: up to now), partition by partition in
    offset order: ListOffsets by time gives where each partition's range starts and ends, a fetch
    reads what lies between."""
    time_from = parse_time_ms(args.time_from)
    time_to = parse_time_ms(args.time_to) if args.time_to else None
    partitions = _partitions_of(args.bootstrap, args.topic, args.partition, args.command_config)
    consumer = consumer_client(args.bootstrap, group_id=None, enable_auto_commit=False,
                               isolation_level=args.isolation_level, **security(args))
    try:
        with kafka_errors(f"query {args.topic} by time"):
            tps = [TopicPartition(args.topic, p) for p in ([args.partition] if args.partition is not None
                                                           else partitions)]
            starts = consumer.offsets_for_times(dict.fromkeys(tps, max(time_from, 0)))
            ends = consumer.end_offsets(tps)
            if time_to is not None:  # the first record after the range, where there is one
                after = consumer.offsets_for_times(dict.fromkeys(tps, time_to + 1))
                ends = {tp: after[tp].offset if after.get(tp) else ends[tp] for tp in tps}
            found = 0
            for tp in tps:
                if starts.get(tp) is not None and starts[tp].offset < ends[tp]:
                    found += _read_range(consumer, tp, starts[tp].offset, ends[tp], time_from, time_to, out)
    finally:
        consumer.close()
    if not found:
        _no_records()
    return 0


def _read_range(consumer: KafkaConsumer, tp: TopicPartition, start: int, end: int, time_from: int,
                time_to: int | None, out: TextIO) -> int:
    """Print the records of [start, end) within the time range; how many."""
    printed = 0
    consumer.assign([tp])
    consumer.seek(tp, start)
    position, deadline = start, time.monotonic() + REQUEST_TIMEOUT_MS / 1000
    while position < end:
        records = consumer.poll(timeout_ms=POLL_MS).get(tp, [])
        if consumer.position(tp) > position:  # a view's empty batches move it without records
            position, deadline = consumer.position(tp), time.monotonic() + REQUEST_TIMEOUT_MS / 1000
        elif time.monotonic() > deadline:
            raise CliError(f"no records came from {tp.topic}-{tp.partition} at offset {position} "
                           f"for {REQUEST_TIMEOUT_MS // 1000} s")
        for record in records:  # CreateTime need not grow with the offset: each record is checked
            if record.offset < end and record.timestamp >= time_from and (time_to is None or
                                                                          record.timestamp <= time_to):
                out.write(json.dumps(_json(record), ensure_ascii=False) + "\n")
                printed += 1
    out.flush()
    return printed
