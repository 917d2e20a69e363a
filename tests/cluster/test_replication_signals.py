"""Which failures of a follower's replication connection say its master is gone (broker/cluster/shipping.py):
a refused connection, or a stream the master's end closed or reset. The follower then reports the
group's partitions without a leader until a connection is made again (Cluster.master_answers);
a timeout or another failure on this side says nothing about the master."""

from __future__ import annotations

import socket

import pytest
import trio

from broker.cluster.shipping import ProtocolError, StreamClosed, _ended, _refused


async def _connect_error(port: int) -> OSError:
    with pytest.raises(OSError) as info:
        await trio.open_tcp_stream("127.0.0.1", port)
    return info.value


def test_a_refused_connection_counts_and_a_timeout_does_not():
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = trio.run(_connect_error, port)
    assert _refused(refused)
    timed_out = OSError("all attempts to connect failed")
    timed_out.__cause__ = ExceptionGroup("attempts", [TimeoutError("timed out")])
    assert not _refused(timed_out)
    assert not _refused(OSError("network unreachable"))


def test_a_stream_closed_or_reset_by_the_master_counts():
    assert _ended(StreamClosed("the master closed the replication stream"))
    assert _ended(ConnectionResetError())
    broken = trio.BrokenResourceError("socket connection broken")
    broken.__cause__ = ConnectionResetError()
    assert _ended(broken)


@pytest.mark.parametrize("exc", [ProtocolError("node 2 leads in epoch 5, expected 4"), TimeoutError(),
                                 trio.ClosedResourceError(), trio.BrokenResourceError("closed here")])
def test_other_failures_do_not(exc):
    assert not _ended(exc)
