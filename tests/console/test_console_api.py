"""The web console's JSON endpoints (docs/extensions.md, *Web console*) on an in-process broker with
real kafka-python clients: the overview's topics and groups with their lag, the message browser's
ways of finding messages, resetting a group's offsets (refused while it is active), deleting a
topic and creating a view, and what protects the actions (Origin, admin.token, ACLs)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.kit.inprocess import InProcessBroker
from tests.kit.wait import wait_until

TOKEN = "console-token-0123456789"


def call(admin: str, path: str, body: dict | None = None, headers: dict | None = None,
         method: str | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{admin}{path}", data=data, method=method or ("POST" if data else "GET"))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("console") / "data", admin_port=0) as b:
        yield b


@pytest.fixture(scope="module")
def orders(broker):
    """A tagged topic of 2 partitions: 5 records keyed by name (one binary, one large), tags eu/us."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("orders", 2, 1, topic_configs={"tag.header": "region"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    sent = {}
    for key, value, region, partition in ((b"alice", b"hello", b"eu", 0), (b"bob", b"hi", b"us", 0),
                                          (b"carol", b"\x00\x01\xff binary", b"eu", 1),
                                          (b"dave", b"x" * 10_000, b"us", 1), (b"erin", b"last", b"eu", 0)):
        sent[key] = producer.send("orders", value, key=key, partition=partition,
                                  headers=[("region", region)]).get(timeout=30)
        time.sleep(0.01)  # distinct timestamps, for the by-time search
    producer.close()
    return sent


def test_the_overview_lists_the_topic_and_a_group_with_its_lag(broker, orders):
    group = f"billing-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
    consumer.commit({TopicPartition("orders", 0): _meta(1), TopicPartition("orders", 1): _meta(2)})
    consumer.close()
    status, overview = call(broker.admin, "/v1/overview")
    assert status == 200
    topic = next(t for t in overview["topics"] if t["name"] == "orders")
    assert (topic["partitions"], topic["messages"], topic["view_of"]) == (2, 5, None)
    assert topic["bytes"] > 10_000  # dave's value
    listed = next(g for g in overview["groups"] if g["name"] == group)
    assert (listed["state"], listed["members"], listed["lag"]) == ("Empty", 0, (3 - 1) + (2 - 2))
    assert overview["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": broker.broker.port, "rack": None}]
    assert overview["broker_groups"] == [] and overview["node"]["clustered"] is False


def _meta(offset):
    from kafka.structs import OffsetAndMetadata
    return OffsetAndMetadata(offset, "", -1)


def _found(broker, query: str) -> list[tuple[int, int]]:
    status, body = call(broker.admin, f"/v1/topics/orders/messages{query}")
    assert status == 200, body
    return [(m["partition"], m["offset"]) for m in body["messages"]]


def test_the_browser_finds_messages_by_key_time_offset_tag_and_id(broker, orders):
    assert _found(broker, "?key=carol") == [(1, 0)]
    assert _found(broker, "") == [(0, 2), (1, 1), (1, 0), (0, 1), (0, 0)]  # newest first
    dave = orders[b"dave"]
    moment = datetime.fromtimestamp(dave.timestamp / 1000, UTC).isoformat()
    assert _found(broker, f"?from={urllib.request.quote(moment)}") == [(1, 1), (0, 2)]  # from that time on, oldest first
    assert _found(broker, f"?from={dave.timestamp}&partition=0") == [(0, 2)]
    assert _found(broker, "?offset=1&partition=0") == [(0, 1), (0, 2)]
    assert _found(broker, "?tag=eu") == [(0, 2), (1, 0), (0, 0)]
    assert _found(broker, "?tag=us&limit=1") == [(1, 1)]
    status, body = call(broker.admin, "/v1/topics/orders/messages?key=alice")
    msg_id = body["messages"][0]["msg_id"]
    assert _found(broker, f"?msg_id={msg_id}") == [(0, 0)]
    assert call(broker.admin, "/v1/topics/orders/messages?msg_id=" + "0" * 32)[0] == 404


def test_binary_and_huge_values_are_hex_or_cut_with_their_size(broker, orders):
    status, body = call(broker.admin, "/v1/topics/orders/messages?partition=1")
    shown = {m["key"]["text"]: m["value"] for m in body["messages"]}
    assert shown["carol"] == {"hex": b"\x00\x01\xff binary".hex(), "size": 10, "truncated": False}
    assert shown["dave"] == {"text": "x" * 2048, "size": 10_000, "truncated": True}
    assert body["messages"][0]["headers"] == [{"key": "region", "value": {"text": "us", "size": 2,
                                                                          "truncated": False}}]


def test_a_request_for_a_million_messages_is_capped(broker, orders):
    status, body = call(broker.admin, "/v1/topics/orders/messages?limit=1000000")
    assert (status, body["limit"], body["capped"], len(body["messages"])) == (200, 500, True, 5)


@pytest.mark.parametrize("query, words", [
    ("?partition=7", "partitions 0 to 1"), ("?offset=1", "needs partition="), ("?limit=x", "limit"),
    ("?from=yesterday", "ISO 8601"),
])
def test_bad_queries_get_one_plain_error(broker, orders, query, words):
    status, body = call(broker.admin, f"/v1/topics/orders/messages{query}")
    assert status == 400 and words in body["error"]


def test_unknown_names_are_404_and_path_characters_stay_names(broker, orders):
    assert call(broker.admin, "/v1/topics/nope")[0] == 404
    status, body = call(broker.admin, "/v1/groups/" + urllib.request.quote("a/../b<script>", safe=""))
    assert status == 404 and "a/../b<script>" in body["error"]


def test_the_topic_page_has_partitions_and_configs(broker, orders):
    status, topic = call(broker.admin, "/v1/topics/orders")
    assert [(p["partition"], p["leader"], p["isr"], p["log_start_offset"], p["log_end_offset"])
            for p in topic["partitions"]] == [(0, 0, [0], 0, 3), (1, 0, [0], 0, 2)]
    configs = {c["name"]: (c["value"], c["source"]) for c in topic["configs"]}
    assert configs["tag.header"] == ("region", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")


def test_resetting_offsets_is_refused_while_the_group_is_active_then_changes_its_lag(broker, orders):
    group = f"reset-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer("orders", bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    wait_until(lambda: consumer.poll(200) is not None and consumer.assignment(), 30, "an assignment")
    consumer.commit({TopicPartition("orders", 0): _meta(3), TopicPartition("orders", 1): _meta(2)})
    status, body = call(broker.admin, f"/v1/groups/{group}/reset-offsets", {"to": "earliest"})
    assert status == 409 and "Stable" in body["error"] and "stop its consumers" in body["error"]
    status, described = call(broker.admin, f"/v1/groups/{group}")
    assert described["state"] == "Stable" and described["members"][0]["assignment"] == [
        {"topic": "orders", "partitions": [0, 1]}]
    consumer.close()
    wait_until(lambda: call(broker.admin, f"/v1/groups/{group}")[1]["state"] == "Empty", 30, "the group empty")
    status, body = call(broker.admin, f"/v1/groups/{group}/reset-offsets", {"to": "earliest", "dry_run": True})
    assert status == 200 and body["dry_run"] and call(broker.admin, f"/v1/groups/{group}")[1]["lag"] == 0
    status, body = call(broker.admin, f"/v1/groups/{group}/reset-offsets", {"to": "earliest"})
    assert status == 200 and sorted((m["partition"], m["old"], m["new"]) for m in body["offsets"]) == [
        (0, 3, 0), (1, 2, 0)]
    status, described = call(broker.admin, f"/v1/groups/{group}")
    assert described["lag"] == 5 and {(o["partition"], o["lag"]) for o in described["offsets"]} == {(0, 3), (1, 2)}
    erin = orders[b"erin"]
    moment = datetime.fromtimestamp(erin.timestamp / 1000, UTC).isoformat()
    status, body = call(broker.admin, f"/v1/groups/{group}/reset-offsets",
                        {"to": "datetime", "datetime": moment, "topic": "orders"})  # a JSON body: "+" as is
    assert status == 200 and sorted((m["partition"], m["new"]) for m in body["offsets"]) == [(0, 2), (1, 2)]


def test_a_view_is_created_and_a_topic_deleted_through_the_kafka_handlers(broker, orders):
    status, body = call(broker.admin, "/v1/views", {"name": "orders-eu", "source": "orders", "tags": ["eu"]})
    assert (status, body) == (201, {"created": "orders-eu"})
    status, view = call(broker.admin, "/v1/topics/orders-eu/messages")
    assert sorted((m["partition"], m["offset"]) for m in view["messages"]) == [(0, 0), (0, 2), (1, 0)]
    status, body = call(broker.admin, "/v1/views", {"name": "bad", "source": "nope", "tags": ["eu"]})
    assert status == 400 and "INVALID_CONFIG" in body["error"]
    assert call(broker.admin, "/v1/topics/orders-eu/delete", {}) == (200, {"deleted": "orders-eu"})
    assert call(broker.admin, "/v1/topics/orders-eu")[0] == 404
    assert call(broker.admin, "/v1/topics/orders-eu/delete", {})[0] == 404


def test_a_post_from_another_sites_page_is_refused(broker, orders):
    status, body = call(broker.admin, "/v1/topics/orders/delete", {}, {"Origin": "http://evil.example"})
    assert status == 403 and "Origin" in body["error"]
    assert call(broker.admin, "/v1/topics/orders")[0] == 200  # still there


def test_the_pages_are_served_with_a_content_security_policy(broker):
    with urllib.request.urlopen(f"http://{broker.admin}/", timeout=10) as answer:
        page = answer.read().decode()
        assert "console.js" in page and "default-src 'self'" in answer.headers["Content-Security-Policy"]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """ACLs on, a token set, and the console acting as User:console, which may only read group ops."""
    with InProcessBroker(tmp_path_factory.mktemp("console-acl") / "data", admin_port=0,
                         **{"admin.token": TOKEN, "admin.principal": "User:console",
                            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                            "super.users": "User:ANONYMOUS"}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)  # ANONYMOUS: a super user here
        admin.create_topics([NewTopic("kept", 1, 1)])
        admin.close()
        yield b


def test_with_a_token_the_pages_load_but_the_data_and_actions_need_it(guarded):
    with urllib.request.urlopen(f"http://{guarded.admin}/console.js", timeout=10) as answer:
        assert answer.status == 200
    assert call(guarded.admin, "/v1/overview")[0] == 401
    assert call(guarded.admin, "/v1/topics/kept/delete", {})[0] == 401
    assert call(guarded.admin, "/v1/overview", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200


def test_actions_are_authorized_as_the_console_principal_like_any_client(guarded):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, body = call(guarded.admin, "/v1/topics/kept/delete", {}, auth)
    assert status == 403 and "TOPIC_AUTHORIZATION_FAILED" in body["error"]
    assert call(guarded.admin, "/v1/topics/kept", headers=auth)[0] == 200


def test_a_share_group_is_listed_and_shown_with_its_start_offsets_and_members(broker, orders):
    group = f"workers-{uuid.uuid4().hex[:6]}"
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures need the handle
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    member = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                            "share.acknowledgement.mode": "explicit"})
    member.subscribe(["orders"])
    try:
        accepted = 0
        deadline = time.monotonic() + 30
        while accepted < 5 and time.monotonic() < deadline:
            for m in member.poll(0.5) or []:
                member.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted += 1
            member.commit_sync()
        assert accepted == 5
        status, overview = call(broker.admin, "/v1/overview")
        listed = next(g for g in overview["groups"] if g["name"] == group)
        assert (listed["state"], listed["protocol_type"], listed["members"], listed["lag"]) == ("Stable", "share", 1, 0)
        status, page = call(broker.admin, f"/v1/groups/{group}")
        assert status == 200, page
        assert [(o["topic"], o["partition"], o["committed"], o["lag"]) for o in page["offsets"]] == [
            ("orders", 0, 3, 0), ("orders", 1, 2, 0)]  # each share-partition's start: everything accepted
        assert [m["assignment"] for m in page["members"]] == [[{"topic": "orders", "partitions": [0, 1]}]]
    finally:
        member.close()
