"""Corruption at rest on a live broker: after a clean stop, bytes are flipped in the middle
of a closed commitlog segment; the restarted broker logs topic, partition and offset range,
answers CORRUPT_MESSAGE for those offsets and serves everything else."""

from __future__ import annotations



from store import entry as E
from tests.kit.wire import create_by_metadata as create
from tests.kit.wire import produce_batch as produce
from tests.kit.wire import WireClient
from tests.durability.damage import _entries, _flip
from tests.durability.records import _batch, _fetch, _read_values

CORRUPT_MESSAGE = 2


def test_flipped_bytes_in_a_closed_segment_answer_corrupt_message_and_the_rest_is_served(fresh_broker, topic_name):
    settings = {"commitlog.segment.bytes": "16384", "message.max.bytes": "4096"}
    broker = fresh_broker(**settings)
    client = WireClient(broker.bootstrap)
    create(client, topic_name)
    other = topic_name + "-other"
    create(client, other)
    for i in range(60):
        for topic in (topic_name, other):
            resp = produce(client, topic, _batch([b"%s:%d:%d" % (topic.encode()[-5:], i, j) + b"." * 300
                                                  for j in range(2)]))
            assert resp.error_code == 0
    client.close()
    assert broker.stop() == 0
    entries = [x for x in _entries(broker.data_dir) if x[2].topic == topic_name]
    segments = sorted({path for path, _, _ in entries})
    closed = segments[len(segments) // 2]
    path, local, victim = [x for x in entries if x[0] == closed][1]
    _flip(path, local + E.HEADER_SIZE + 80, 3)

    broker.start()
    client = WireClient(broker.bootstrap)
    first, stop = victim.base_offset, victim.base_offset + victim.record_count
    log = broker.log()
    assert f"topic {topic_name} partition 0 offsets {first}-{stop - 1}" in log
    for offset in range(first, stop):
        part = _fetch(client, topic_name, 0, offset)
        assert part.error_code == CORRUPT_MESSAGE and part.records in (b"", None)
        assert part.high_watermark == 120
    expected = [b"%s:%d:%d" % (topic_name.encode()[-5:], i // 2, i % 2) + b"." * 300 for i in range(120)]
    assert _read_values(client, topic_name, 0, 0, first) == expected[:first]
    assert _read_values(client, topic_name, 0, stop, 120) == expected[stop:]
    other_expected = [b"%s:%d:%d" % (other.encode()[-5:], i // 2, i % 2) + b"." * 300 for i in range(120)]
    assert _read_values(client, other, 0, 0, 120) == other_expected
    assert produce(client, topic_name, _batch([b"new"])).base_offset == 120
