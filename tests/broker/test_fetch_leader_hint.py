"""Fetch v16+ (KIP-951): a partition answering NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names
its current leader, and the answer carries that leader's endpoint; other errors and older versions
carry neither. A single node never answers either error, so the answer is built here for a node of
a broker group whose master is node 2 (tests/cluster runs such groups live)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from kafka.protocol.consumer import FetchResponse

from broker.handlers.fetch import _encode
from protocol.errors import ErrorCode
from protocol.fetch_response import error_partition


class GroupFollower:
    """Node 1 of a broker group whose master, node 2, leads every partition at epoch 5."""

    def partition_view(self, topic, partition):
        return 2, 5, [1, 2, 3], [1, 2, 3], []

    def live_brokers(self):
        return [(1, None, None, "r1"), (2, "node-2", 9192, "r2"), (3, "node-3", 9193, None)]


BROKER = SimpleNamespace(node_id=1, advertised_host="node-1", advertised_port=9191, config={"broker.rack": "r1"},
                         topology=GroupFollower())


def _answer(version, error):
    key = "t" if version < 13 else uuid.UUID(int=7)
    body = b"".join(_encode(BROKER, version, [((key, 0), "t", error_partition(0, error)),
                                              ((key, 1), "t", error_partition(1, ErrorCode.NONE))], 0, 0))
    return FetchResponse[version].decode(body)


def _leader(partition):
    """(leader id, epoch) of the tagged CurrentLeader; None when the field was not sent."""
    sent = partition.current_leader
    return None if sent is None else (sent.leader_id, sent.leader_epoch)


@pytest.mark.parametrize("error", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH])
@pytest.mark.parametrize("version", [16, 17, 18])
def test_a_moved_partition_names_its_leader_and_the_answer_its_endpoint(version, error):
    r = _answer(version, error)
    moved, other = r.responses[0].partitions
    assert (_leader(moved), _leader(other)) == ((2, 5), None)
    assert [(n.node_id, n.host, n.port, n.rack) for n in r.node_endpoints] == [(2, "node-2", 9192, "r2")]


@pytest.mark.parametrize("version, error", [(15, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                            (18, ErrorCode.UNKNOWN_LEADER_EPOCH)])
def test_older_versions_and_other_errors_name_no_leader(version, error):
    r = _answer(version, error)
    assert _leader(r.responses[0].partitions[0]) is None
    assert not getattr(r, "node_endpoints", None)
