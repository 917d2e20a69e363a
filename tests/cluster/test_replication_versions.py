"""Nodes of one broker group running different replication versions (broker/cluster/shipping.py): the
master answers a follower of another version with its own version (WELCOME, OTHER_VERSION) and
logs one plain line; the follower logs one too, changes nothing in its log and retries with its
backoff; the rest of the group goes on replicating."""

from __future__ import annotations

import logging
import socket
import time
from types import SimpleNamespace

import pytest
import trio

from broker.cluster.shipping import (
    HELLO,
    HELLO_HEAD,
    MAGIC,
    OTHER_VERSION,
    VERSION,
    WELCOME,
    OtherVersion,
    _pull,
    receive_exactly,
)
from store import Store
from tests.store.conftest import append, build_batch, tiny_config


def _hello_of_version(address: tuple[str, int], version: int, body: bytes) -> bytes:
    """Everything a master answers a HELLO of `version` (then it closes the stream)."""
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(HELLO_HEAD.pack(MAGIC, version) + body)
        answer = b""
        try:
            while chunk := s.recv(4096):
                answer += chunk
        except ConnectionResetError:  # closed with the rest of the HELLO unread: a reset after the answer
            pass
    return answer


def test_a_master_names_its_version_to_a_follower_of_another_one(broker_group):
    group = broker_group(size=2)
    master = group.master()
    address = group.replication_address(master)
    # an older follower's HELLO (as long as this version's), and a newer one's longer HELLO
    for version, body in ((1, bytes(HELLO.size - HELLO_HEAD.size)), (3, bytes(40)), (1, bytes(16))):
        assert _hello_of_version(address, version, body) == WELCOME.pack(OTHER_VERSION, VERSION, -1)
    log = group.nodes[master].log()
    assert log.count("runs replication version 1 and this node version 2") == 1  # once, not per attempt
    assert log.count("runs replication version 3 and this node version 2") == 1
    assert "must run the same Gregor version" in log
    # the group's own follower was not disturbed
    assert len(group.wait_sync_state_set(2, timeout=10)) == 2


def test_a_follower_of_another_version_than_its_master_keeps_its_log_and_says_why(tmp_path, caplog):
    store = Store.open(tmp_path / "follower", tiny_config())
    try:
        store.create_topic("orders", 1, {})
        append(store, "orders", 0, build_batch([b"kept"]))
        end = store.log_end_position
        cluster = SimpleNamespace(store=store, node_id=2)
        hellos: list[tuple] = []

        async def main() -> None:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]

            async def newer_master() -> None:  # a master of version 3 answers as every version does
                for _ in range(2):
                    stream = await listeners[0].accept()
                    async with stream:
                        hellos.append(HELLO.unpack(await receive_exactly(stream, HELLO.size)))
                        await stream.send_all(WELCOME.pack(OTHER_VERSION, 3, -1))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(newer_master)
                for _ in range(2):
                    welcomed: list[bool] = []
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    async with stream:
                        with pytest.raises(OtherVersion, match="master 7 runs replication version 3, this node 2"):
                            await _pull(cluster, stream, 7, 5, welcomed)
                    assert not welcomed
            await listeners[0].aclose()

        with caplog.at_level(logging.ERROR, logger="gregor.replication"):
            trio.run(main)
        assert [h[:3] for h in hellos] == [(MAGIC, VERSION, 2)] * 2
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == [("cannot follow master 7: node 7 runs replication version 3 and this node version 2: the "
                          "nodes of a broker group must run the same Gregor version (stop the group's nodes, "
                          "upgrade them all, start them again); until then neither can follow the other")]
        assert store.log_end_position == end  # nothing truncated or applied
        deadline = time.monotonic() + 5
        while store.key_index_behind() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        store.close()
