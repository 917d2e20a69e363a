"""How a master's replication stream sends the commitlog (broker/cluster/shipping.py's _SegmentFile):
each chunk with sendfile from its segment's file, opened by path with the stream's own
descriptor. The bytes that arrive are read_log's, byte for byte, and applied by a follower they
give the leader's log; a segment deleted while shipped stays readable; a position no segment
holds sends nothing, so the caller sends from the mapping instead."""

from __future__ import annotations

import os
import time

import pytest
import trio

from broker.cluster.shipping import CHUNK, StreamClosed, _Lowat, _SegmentFile, _Splicer, receive_exactly
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


def test_chunks_spliced_from_the_socket_into_the_followers_file_give_the_leaders_log(tmp_path):
    """A follower's _Splicer moves each chunk from the socket through a pipe into its commitlog's
    file, and applies it from there; at a roll the chunk is not spliced (the caller receives it
    into a buffer), and a chunk the master's end cut off is never applied and is zeroed."""
    leader = Store.open(tmp_path / "leader", tiny_config())
    leader.create_topic("orders", 2, {})
    follower = Store.open(tmp_path / "follower", tiny_config())
    for i in range(60):  # several 8 KiB segments
        append(leader, "orders", i % 2, build_batch([bytes([i]) * 300, b"x"]))

    async def main():
        master, replica = await _pair()
        files = _SegmentFile(leader)
        splicer = _Splicer.open(follower)
        assert splicer is not None and splicer.size >= 64 << 10
        lowat = _Lowat(replica.socket)
        position, spliced, buffered = leader.log_start_position, 0, 0
        while position < leader.log_end_position:
            at, data = leader.read_log(position, 3000)
            header = CHUNK.pack(at, 0, 0, len(data))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(files.send, master.socket, header, at, len(data))
                assert CHUNK.unpack(await receive_exactly(replica, CHUNK.size)) == (at, 0, 0, len(data))
                if await splicer.receive(replica.socket, lowat, at, len(data)):
                    follower.apply_spliced(at, len(data))
                    spliced += 1
                else:
                    follower.append_replicated(at, await receive_exactly(replica, len(data)))
                    buffered += 1
            position = at + len(data)
        assert spliced > buffered >= 3
        # the master's end closes halfway through a chunk: the stream ends, nothing is applied
        append(leader, "orders", 0, build_batch([b"last" * 100]))
        end = follower.log_end_position
        at, data = leader.read_log(end, 3000)
        await master.send_all(CHUNK.pack(at, 0, 0, len(data)) + bytes(data[:len(data) // 2]))
        await master.aclose()
        assert CHUNK.unpack(await receive_exactly(replica, CHUNK.size))[0] == at
        with pytest.raises(StreamClosed):
            await splicer.receive(replica.socket, lowat, at, len(data))
        fd, offset = follower.splice_target(at, len(data))
        assert os.pread(fd, len(data) // 2, offset) == bytes(data[:len(data) // 2])
        follower.discard_spliced()
        assert os.pread(fd, len(data), offset) == bytes(len(data)) and follower.log_end_position == end
        splicer.close()
        files.close()
        await replica.aclose()

    trio.run(main)
    assert (leader.high_watermark("orders", 0), follower.high_watermark("orders", 0)) == (61, 60)
    for p in range(2):
        ours = [bytes(b) for b in follower.read("orders", p, 0, 1 << 30).batches]
        assert ours == [bytes(b) for b in leader.read("orders", p, 0, 1 << 30).batches][:30]
    leader.close()
    follower.close()
