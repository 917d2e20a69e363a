"""Replays Kafka 3.9's recorded group exchanges (08_*.json) against an
in-process broker, step by step, and compares the normalised answers.

Requests are rebuilt from the recorded request views with kafka-python's
classes and go through protocol.codec both ways, exactly as on the wire. The
clock is trio's MockClock, so the 3 s initial rebalance delay costs nothing
and the recorded elapsed time is still checked.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
import trio
import trio.testing
from kafka.protocol.consumer import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from protocol.api_versions import API_SPECS
from tests.kit.inprocess import assignment, exchange, running_broker, subscription

RECORDED = Path(__file__).resolve().parents[1] / "conformance" / "reference" / "kafka-3.9.0"
PLACEHOLDER = re.compile(r"<(group|topic):([\w-]+)>")
BLOB_FIELDS = ("metadata", "member_metadata", "assignment", "member_assignment")


# --- rebuilding requests from recorded views -------------------------------------------------

def _build(data_class, fields: dict, values: dict):
    kwargs = {}
    for name, value in values.items():
        field = fields[name]
        if field.is_struct_array() and value is not None:
            value = [_build(field.data_class, field.fields, v) for v in value]
        elif name in BLOB_FIELDS and isinstance(value, dict):
            value = _encode_blob(name, value)
        kwargs[name] = value
    return data_class(**kwargs)


def _encode_blob(name: str, view: dict) -> bytes:
    if name in ("metadata", "member_metadata"):
        return subscription(view["topics"])
    return assignment({p["topic"]: p["partitions"] for p in view["assigned_partitions"]})


# --- normalising responses ---------------------------------------------------------------------

def plain(obj, version: int) -> dict:
    out = {}
    tags = getattr(obj, "tags", None) or set()
    for f in obj._struct._fields:
        if not f.for_version_q(version) or (f.tagged_field_q(version) and f.name not in tags):
            continue
        value = getattr(obj, f.name)
        if f.is_struct_array():
            out[f.name] = None if value is None else [plain(v, version) for v in value]
        elif f.type_str == "bitfield":
            bits = {31} if value is None else set(value)
            n = sum(1 << b for b in bits)
            out[f.name] = n - (1 << 32) if n & 0x80000000 else n
        elif f.name in BLOB_FIELDS and isinstance(value, (bytes, bytearray, memoryview)):
            out[f.name] = _decode_blob(f.name, bytes(value))
        else:
            out[f.name] = value
    return out


def _decode_blob(name: str, blob: bytes):
    if not blob:
        return ""
    version = struct.unpack(">h", blob[:2])[0]
    cls = ConsumerProtocolSubscription if name in ("metadata", "member_metadata") else ConsumerProtocolAssignment
    return {"consumer_protocol_version": version, **plain(cls.decode(blob), version)}


class Names:
    """Maps the recordings' placeholders to this run's names and back."""

    def __init__(self) -> None:
        self.members: dict[str, str] = {}  # real id -> <member_id:N>

    def member_placeholder(self, real: str) -> str:
        return self.members.setdefault(real, f"<member_id:{len(self.members) + 1}>")

    def to_real(self, value, key: str | None = None):
        if isinstance(value, dict):
            return {k: self.to_real(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.to_real(v, key) for v in value]
        if isinstance(value, str):
            if value.startswith("<member_id:"):
                for real, label in self.members.items():
                    if label == value:
                        return real
                real = f"unknown-member-{len(self.members) + 1}"
                self.members[real] = value
                return real
            if key == "committed_metadata" and (m := re.fullmatch(r"<(\d+) chars>", value)):
                return "m" * int(m.group(1))
            return PLACEHOLDER.sub(lambda m: f"{m.group(1)}-{m.group(2)}", value)
        return value

    def to_placeholders(self, value, key: str | None = None):
        if isinstance(value, dict):
            return {k: self.to_placeholders(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.to_placeholders(v, key) for v in value]
        if isinstance(value, str):
            if key == "host":
                return "<host>"
            if key == "client_host":
                return "<client_host>"
            if key in ("member_id", "leader") and value:
                return self.member_placeholder(value)
            return re.sub(r"\b(group|topic)-([\w-]+)", lambda m: f"<{m.group(1)}:{m.group(2)}>", value)
        if isinstance(value, int) and not isinstance(value, bool):
            if key == "port":
                return "<port>"
            if key == "node_id":
                return "<node_id>"
        return value


def _sorted_lists(value):
    """Orders the lists whose order Kafka does not define (see the recordings' README)."""
    if isinstance(value, dict):
        value = {k: _sorted_lists(v) for k, v in value.items()}
        for key, sort_key in (("partitions", "partition_index"), ("results", "group_id"), ("groups", "group_id"),
                              ("topics", "name")):
            items = value.get(key)
            if isinstance(items, list) and items and isinstance(items[0], dict) and sort_key in items[0]:
                value[key] = sorted(items, key=lambda x: x[sort_key])
        return value
    if isinstance(value, list):
        return [_sorted_lists(v) for v in value]
    return value


SCENARIOS = sorted(p.stem for p in RECORDED.glob("08_*.json")) if RECORDED.is_dir() else []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_group_exchange_matches_kafka_recording(scenario: str, tmp_path):
    recording = json.loads((RECORDED / f"{scenario}.json").read_text())
    assert recording["status"] == "ok"

    async def replay():
        names = Names()
        async with running_broker(tmp_path, **{"group.initial.rebalance.delay.ms": 3000}) as broker:
            broker.store.create_topic("topic-fetch", 6, {})
            for step in recording["steps"]:
                spec = API_SPECS[step["api_key"]]
                version = step["api_version"]
                request_cls = spec.request[version]
                request = _build(request_cls, request_cls.fields, names.to_real(step["request"]))
                started = trio.current_time()
                response = await exchange(broker, request)
                elapsed_ms = (trio.current_time() - started) * 1000
                got = names.to_placeholders(plain(response, version))
                if step["api"] == "ListGroups":
                    got["groups"] = [g for g in got["groups"] if g["group_id"].startswith("<group:")]
                assert _sorted_lists(got) == _sorted_lists(step["response"]), step["label"]
                if "elapsed_ms_rounded" in step:
                    assert round(elapsed_ms / 500) * 500 == step["elapsed_ms_rounded"], step["label"]

    # The threshold keeps the clock still while a commit fsyncs in a worker thread.
    trio.run(replay, clock=trio.testing.MockClock(autojump_threshold=0.2))
