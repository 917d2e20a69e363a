"""Recovery: rebuilding derived files from the commitlog, torn tails, untrusted queues."""

from __future__ import annotations

import shutil

import pytest

from store import Store
from store.segment import segment_name
from tests.store.conftest import append, build_batch, crash_to, saved_checkpoint, tiny_config


def _fill(store: Store) -> None:
    store.create_topic("a", 2, {"key.index.enable": "true", "tag.header": "tag"})
    store.create_topic("b", 1, {})
    for i in range(60):
        keys = [f"k{i % 7}".encode(), None]
        headers = [[("tag", f"t{i % 3}".encode())], []]
        append(store, "a", i % 2, build_batch([b"x" * (50 + i), b"y"], keys=keys, headers=headers,
                                               timestamps=[1000 + (i * 37) % 500, 1000 + i]))
        append(store, "b", 0, build_batch([bytes([i]) * 300], timestamps=[5000 - i]))


def _answers(store: Store) -> dict:
    out = {}
    for topic, parts in (("a", 2), ("b", 1)):
        for p in range(parts):
            hw = store.high_watermark(topic, p)
            out[(topic, p, "hw")] = (hw, store.log_start_offset(topic, p))
            out[(topic, p, "read")] = [bytes(v) for v in store.read(topic, p, 0, 1 << 30).batches]
            out[(topic, p, "mid")] = [bytes(v) for v in store.read(topic, p, hw // 2, 2000).batches]
            out[(topic, p, "ts")] = [store.offset_for_timestamp(topic, p, ts) for ts in range(900, 5100, 97)]
            out[(topic, p, "max")] = store.max_timestamp_offset(topic, p)
            out[(topic, p, "tags")] = list(store.tag_hashes(topic, p, 0, hw))
    for i in range(8):
        hits = store.lookup_key("a", f"k{i}".encode(), 0, 2**62)
        out[("key", i)] = sorted((h.partition, h.offset, h.value, h.msg_id) for h in hits)
    return out


@pytest.mark.parametrize("clean", [True, False])
def test_deleting_queues_and_index_gives_identical_answers(data_dir, clean):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    before = _answers(s)
    s.close()
    if not clean:
        (data_dir / "clean_shutdown").unlink()
    shutil.rmtree(data_dir / "consumequeue")
    shutil.rmtree(data_dir / "index")
    s = Store.open(data_dir, tiny_config())
    assert _answers(s) == before
    s.close()


def test_clean_reopen_keeps_answers(data_dir):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    before = _answers(s)
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert _answers(s) == before
    append(s, "b", 0, build_batch([b"more"]))
    assert s.high_watermark("b", 0) == 61
    s.close()


@pytest.mark.parametrize("damage", ["missing_file", "wrong_size", "beyond_end"])
def test_corrupt_consume_queue_is_rebuilt_not_trusted(data_dir, damage):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    before = _answers(s)
    s.close()
    qdir = data_dir / "consumequeue" / "b" / "0"
    files = sorted(qdir.iterdir())
    if damage == "missing_file":
        files[-1].unlink()
    elif damage == "wrong_size":
        with open(files[0], "ab") as f:
            f.write(b"\0" * 7)
    else:
        with open(files[-1], "r+b") as f:  # last entry points past the commitlog end
            raw = bytearray(f.read())
            slot = (60 - 1) % 16
            raw[slot * 20:slot * 20 + 8] = (10**9).to_bytes(8, "little")
            f.seek(0)
            f.write(raw)
    s = Store.open(data_dir, tiny_config())
    assert _answers(s) == before
    s.close()


def test_torn_tail_is_truncated_and_appends_continue(data_dir):
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    append(s, "t", 0, build_batch([bytes([0]) * 200]))
    checkpoint = saved_checkpoint(s, data_dir)
    for i in range(1, 5):
        append(s, "t", 0, build_batch([bytes([i]) * 200]))
    end = s.read("t", 0, 4, 1).batches[0]
    s.close()
    crash_to(data_dir, checkpoint)  # the last entry was written after the last checkpoint
    seg = data_dir / "commitlog" / segment_name(0)
    raw = bytearray(seg.read_bytes())
    last_start = raw.find(bytes(end)) - 60
    raw[last_start + 100] ^= 0xFF  # tear the last entry
    raw[last_start + 2000:last_start + 2010] = b"garbage!!!"
    seg.write_bytes(raw)
    s = Store.open(data_dir, tiny_config())
    assert s.high_watermark("t", 0) == 4
    assert not any((data_dir / "commitlog" / segment_name(0)).read_bytes()[last_start:8192])
    r = append(s, "t", 0, build_batch([b"after"]))
    assert r.base_offset == 4
    s.close()
    s = Store.open(data_dir, tiny_config())
    assert bytes(s.read("t", 0, 4, 1).batches[0][-6:-1]) == b"after"
    s.close()


def test_after_a_crash_only_what_followed_the_checkpoint_is_rederived(data_dir, caplog):
    import logging
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    checkpoint = saved_checkpoint(s, data_dir)
    later = 0
    for i in range(25):  # after the checkpoint: existing queues, a new topic, new partitions
        append(s, "a", i % 2, build_batch([b"late" * (i + 1)], keys=[f"k{i % 7}".encode()],
                                          headers=[[("tag", b"t1")]], timestamps=[2000 + i]))
        later += 1
    s.create_topic("c", 2, {})
    s.add_partitions("b", 3)
    later += 2  # the two topic records of the state topic
    for p in range(3):
        append(s, "b", p, build_batch([b"b-late-%d" % p]))
        append(s, "c", p % 2, build_batch([b"c-late-%d" % p]))
        later += 2
    before = _answers(s)
    extra = {(t, p): [bytes(v) for v in s.read(t, p, 0, 1 << 30).batches] for t, n in (("b", 3), ("c", 2))
             for p in range(n)}
    s.close()
    crash_to(data_dir, checkpoint)
    with caplog.at_level(logging.INFO, logger="store.recovery"):
        s = Store.open(data_dir, tiny_config())
    try:
        assert f": {later} later entries re-derived" in caplog.text
        assert "rebuilding" not in caplog.text
        assert _answers(s) == before
        assert {(t, p): [bytes(v) for v in s.read(t, p, 0, 1 << 30).batches] for t, n in (("b", 3), ("c", 2))
                for p in range(n)} == extra
    finally:
        s.close()


def test_queue_entries_for_a_batch_the_crash_lost_are_cleared(data_dir, caplog):
    """The queue page reached the disk, the commitlog bytes of the batch it points at did not."""
    import logging
    s = Store.open(data_dir, tiny_config())
    s.create_topic("t", 1, {})
    for i in range(3):
        append(s, "t", 0, build_batch([bytes([i]) * 200]))
    checkpoint = saved_checkpoint(s, data_dir)
    for i in range(3, 5):
        append(s, "t", 0, build_batch([bytes([i]) * 200]))
    last = bytes(s.read("t", 0, 4, 1).batches[0])
    s.close()
    crash_to(data_dir, checkpoint)
    seg = data_dir / "commitlog" / segment_name(0)
    raw = bytearray(seg.read_bytes())
    at = raw.find(last) - 60
    raw[at:at + 60 + len(last) + 1] = bytes(60 + len(last) + 1)  # never written
    seg.write_bytes(raw)
    s = Store.open(data_dir, tiny_config())
    try:
        assert s.high_watermark("t", 0) == 4
        assert s._partition("t", 0).queue.entry(4)[1] == 0  # the orphan entry is gone
        assert append(s, "t", 0, build_batch([b"after"])).base_offset == 4
    finally:
        s.close()
    with caplog.at_level(logging.WARNING, logger="store.store"):
        s = Store.open(data_dir, tiny_config())  # clean: the derived files are trusted as they are
    try:
        assert "rebuilding" not in caplog.text
        assert bytes(s.read("t", 0, 4, 1).batches[0][-6:-1]) == b"after"
    finally:
        s.close()


def test_a_checkpoint_of_format_1_falls_back_to_a_full_rebuild(data_dir, caplog):
    import json
    import logging
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    before = _answers(s)
    s.close()
    doc = json.loads((data_dir / "checkpoint").read_text())
    doc["version"] = 1
    del doc["key_index"]
    crash_to(data_dir, json.dumps(doc).encode())
    with caplog.at_level(logging.WARNING):
        s = Store.open(data_dir, tiny_config())
    try:
        assert "rebuilding from the commitlog" in caplog.text
        assert _answers(s) == before
    finally:
        s.close()
