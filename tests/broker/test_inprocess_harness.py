"""The test kit's in-process broker (tests/kit/inprocess.py) answers as the broker process does:
the same frames over its in-memory stream as over its socket, a broken frame closes only that
connection, a fetch's zero-copy answer arrives whole, and a stop closes the store cleanly."""

from __future__ import annotations

import struct

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from tests.kit.inprocess import InProcessBroker
from tests.kit.wire import WireClient, batch, create_topic, fetch, produce_batch


def test_memory_and_socket_clients_get_the_same_answers(tmp_path):
    with InProcessBroker(tmp_path / "data") as broker:
        memory, socket = broker.client(), WireClient(broker.bootstrap)
        for request in (ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                        MetadataRequest[9](topics=None, allow_auto_topic_creation=False,
                                           include_cluster_authorized_operations=False,
                                           include_topic_authorized_operations=False)):
            memory.send(request)
            socket.send(request)  # the same correlation id: the frames must match byte for byte
            assert memory.receive_frame() == socket.receive_frame()
        memory.close()
        socket.close()


def test_a_broken_frame_closes_only_its_connection(tmp_path):
    with InProcessBroker(tmp_path / "data") as broker:
        victim, bystander = broker.client(), broker.client()
        victim.send_raw(struct.pack(">i", 5) + b"\xff" * 5)
        assert victim.closed_by_peer(5)
        assert bystander.request(MetadataRequest[1](topics=None)).brokers


def test_produce_then_fetch_through_memory_and_a_clean_stop(tmp_path):
    with InProcessBroker(tmp_path / "data", **{"auto.create.topics.enable": "false"}) as broker:
        client = broker.client()
        topic, error, message = create_topic(client)
        assert error == 0, message
        records = batch(100, b"x" * 100)
        assert produce_batch(client, topic, records).error_code == 0
        answer = fetch(client, topic, 0)
        assert answer.error_code == 0 and answer.high_watermark == 100
        assert bytes(answer.records).endswith(records[12:])  # the batch as stored, base offset 0 set
    assert (tmp_path / "data" / "clean_shutdown").exists()  # the store's mark of a clean close
