"""Recovery: rebuilding derived files from the commitlog, torn tails, untrusted queues."""

from __future__ import annotations

import shutil

import pytest

from store import Store
from store.segment import segment_name
from tests.store.conftest import append, build_batch, tiny_config


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
    for i in range(5):
        append(s, "t", 0, build_batch([bytes([i]) * 200]))
    end = s.read("t", 0, 4, 1).batches[0]
    s.close()
    (data_dir / "clean_shutdown").unlink()
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
