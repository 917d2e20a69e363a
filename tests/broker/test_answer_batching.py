"""Pipelined requests whose handlers never wait (broker/net/connection.py's BATCHED_APIS) have
their answers written together, in order; an answer is never held behind a request that waits
(a long-poll Fetch), nor behind the end of the bytes received."""

from __future__ import annotations

import struct

import trio
import trio.testing
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from broker.net.connection import MAX_HELD, serve_stream
from tests.kit.inprocess import running_broker

TOPIC = "pipelined"


class CountingStream(trio.abc.Stream):
    """The server's side of a memory stream pair, counting the writes the connection makes."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner, self.writes = inner, 0

    async def send_all(self, data) -> None:
        self.writes += 1
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None):
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


def list_offsets(correlation_id: int, partition: int) -> bytes:
    R = ListOffsetsRequest[7]
    T = R.ListOffsetsTopic
    request = R(replica_id=-1, isolation_level=0, topics=[T(name=TOPIC, partitions=[
        T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-2)])])
    request.with_header(correlation_id=correlation_id, client_id="pipeline")
    return bytes(request.encode(header=True, framed=True))


def long_poll_fetch(correlation_id: int, max_wait_ms: int) -> bytes:
    F = FetchRequest.FetchTopic
    request = FetchRequest[12](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[F(topic=TOPIC, partitions=[
            F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")
    request.with_header(correlation_id=correlation_id, client_id="pipeline")
    return bytes(request.encode(header=True, framed=True))


async def read_answers(client: trio.abc.Stream, count: int) -> list[tuple[int, float]]:
    """(correlation id, trio time received) of the next `count` answers."""
    buf, out = bytearray(), []
    while len(out) < count:
        while len(buf) >= 8 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
            size = struct.unpack_from(">i", buf)[0]
            out.append((struct.unpack_from(">i", buf, 4)[0], trio.current_time()))
            del buf[:4 + size]
        if len(out) < count:
            buf += await client.receive_some(1 << 16)
    return out


def run(test, tmp_path) -> None:
    async def main():
        async with running_broker(tmp_path) as broker:
            broker.store.create_topic(TOPIC, 4, {})
            client, server = trio.testing.memory_stream_pair()
            counting = CountingStream(server)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve_stream, broker, broker.listeners[0], counting, "127.0.0.1:1")
                await test(client, counting)
                nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.1))


def test_pipelined_list_offsets_are_answered_in_order_with_few_writes(tmp_path):
    count = 3 * MAX_HELD

    async def test(client, counting):
        await client.send_all(b"".join(list_offsets(i, i % 4) for i in range(count)))
        answers = await read_answers(client, count)
        assert [correlation for correlation, _ in answers] == list(range(count))
        # one write per request before; now one per MAX_HELD answers (+1 for the last, unheld)
        assert counting.writes <= count // MAX_HELD + 2, counting.writes

    run(test, tmp_path)


def test_an_answer_is_not_held_behind_a_long_poll_fetch(tmp_path):
    async def test(client, counting):
        start = trio.current_time()
        await client.send_all(list_offsets(1, 0) + long_poll_fetch(2, 5_000) + list_offsets(3, 1))
        answers = await read_answers(client, 3)
        assert [correlation for correlation, _ in answers] == [1, 2, 3]
        # the first answer left before the fetch began its wait; the fetch waited it out
        assert answers[0][1] - start < 1.0, answers
        assert answers[1][1] - start >= 5.0, answers

    run(test, tmp_path)
