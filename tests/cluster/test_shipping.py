"""How a master's replication stream sends the commitlog (broker/replication.py's _SegmentFile):
each chunk with sendfile from its segment's file, opened by path with the stream's own
descriptor. The bytes that arrive are read_log's, byte for byte, and applied by a follower they
give the leader's log; a segment deleted while shipped stays readable; a position no segment
holds sends nothing, so the caller sends from the mapping instead."""

from __future__ import annotations

import time

import trio

from broker.replication import CHUNK, _SegmentFile, receive_exactly
from store import Store
from tests.store.conftest import append, build_batch, tiny_config


async def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    await listeners[0].aclose()
    return server, client


def _same_log(leader: Store, follower: Store) -> None:
    assert follower.log_end_position == leader.log_end_position
    position = 0
    while position < leader.log_end_position:
        at, theirs = leader.read_log(position, 1 << 20)
        assert follower.read_log(position, 1 << 20) == (at, theirs)
        position = at + len(theirs)
    for p in range(2):
        assert follower.high_watermark("orders", p) == leader.high_watermark("orders", p) == 60  # 30 batches of 2 records
        ours = [bytes(b) for b in follower.read("orders", p, 0, 1 << 30).batches]
        assert ours == [bytes(b) for b in leader.read("orders", p, 0, 1 << 30).batches]


def test_chunks_sent_from_the_segment_files_give_the_follower_the_leaders_log(tmp_path):
    leader = Store.open(tmp_path / "leader", tiny_config())
    leader.create_topic("orders", 2, {})
    follower = Store.open(tmp_path / "follower", tiny_config())  # gets the topic from the leader's log
    for i in range(60):  # several 8 KiB segments
        append(leader, "orders", i % 2, build_batch([bytes([i]) * 300, b"x"]))
    deadline = time.monotonic() + 30
    # the key dispatcher's worker reads segments by path: one deleted before it got there would
    # stall it (and close waits 5 s for it); this test is about shipping, so it lets it finish
    while leader.key_index_behind() and time.monotonic() < deadline:
        time.sleep(0.01)

    async def main():
        master, replica = await _pair()
        files = _SegmentFile(leader)
        position, chunks, deleted = leader.log_start_position, 0, False
        while position < leader.log_end_position:
            at, data = leader.read_log(position, 3000)
            header = CHUNK.pack(at, 0, 0, len(data))
            async with trio.open_nursery() as nursery:  # the receiver reads while the sender sends
                nursery.start_soon(files.send, master.socket, header, at, len(data))
                got = await receive_exactly(replica, CHUNK.size + len(data))
            assert got == header + bytes(data)
            follower.append_replicated(at, memoryview(got)[CHUNK.size:])
            if not deleted and files.fd >= 0 and files.start <= at + len(data) < files.end:
                leader.log_segment_file(at)[0].unlink()  # retention deletes it mid-segment: still readable
                deleted = True
            position = at + len(data)
            chunks += 1
        assert chunks > 3 and deleted
        nowhere = leader.log_end_position + (1 << 40)  # no segment holds it: nothing sent, the caller falls back
        assert not await files.send(master.socket, b"header", nowhere, 10)
        files.close()
        await master.aclose()
        assert await replica.receive_some(100) == b""
        await replica.aclose()

    trio.run(main)
    _same_log(leader, follower)
    leader.close()
    follower.close()
