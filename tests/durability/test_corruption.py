"""Corruption at rest: bytes flipped inside a closed commitlog segment are found at startup
(after a clean shutdown by the CRC check, after a crash by the recovery scan); the damaged
offsets read as an error, everything before and after them stays readable."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from store import CorruptData, Store
from store import entry as E
from store.records import decode
from tests.store.conftest import append, build_batch, crash_to, saved_checkpoint, tiny_config
from tests.durability.damage import _entries, _flip

TOPIC = "t"
PARTITIONS = 3


def _fill(store: Store, batches: int = 90, create: bool = True) -> None:
    if create:
        store.create_topic(TOPIC, PARTITIONS, {"key.index.enable": "true"})
    for i in range(batches):
        p = i % PARTITIONS
        hw = store.high_watermark(TOPIC, p)
        values = [f"{p}:{hw + j}".encode() + b"." * 150 for j in range(2)]
        append(store, TOPIC, p, build_batch(values, keys=[b"k%d" % i, b"k%d" % i]))


def _middle_of_closed_segment(data_dir: Path) -> tuple[Path, int, E.EntryHeader]:
    entries = _entries(data_dir)
    segments = sorted({path for path, _, _ in entries})
    closed = segments[len(segments) // 2]
    assert closed != segments[-1]
    inside = [x for x in entries if x[0] == closed]
    return inside[len(inside) // 2]


def _values(store: Store, p: int, start: int, stop: int) -> list[bytes]:
    out = []
    offset = start
    while offset < stop:
        batches = store.read(TOPIC, p, offset, 1 << 20).batches
        assert batches
        for view in batches:
            for r in decode(view):
                if start <= r.offset < stop and r.offset >= offset:
                    out.append(r.value.split(b".")[0])
            offset = r.offset + 1
    return out


def _assert_damage_contained(store: Store, victim: E.EntryHeader) -> None:
    p, first, last = victim.partition, victim.base_offset, victim.base_offset + victim.record_count
    with pytest.raises(CorruptData) as err:
        store.read(TOPIC, p, first, 1 << 20)
    assert (err.value.first_offset, err.value.next_offset) == (first, last)
    with pytest.raises(CorruptData):
        store.read(TOPIC, p, last - 1, 1 << 20)
    # earlier offsets read up to the damage (never past it), later ones after it
    before = store.read(TOPIC, p, 0, 1 << 30).batches
    assert before and all(int.from_bytes(v[:8], "big") < first for v in before)
    assert _values(store, p, 0, first) == [f"{p}:{o}".encode() for o in range(first)]
    hw = store.high_watermark(TOPIC, p)
    assert _values(store, p, last, hw) == [f"{p}:{o}".encode() for o in range(last, hw)]
    for other in range(PARTITIONS):
        if other != p:
            hw = store.high_watermark(TOPIC, other)
            assert _values(store, other, 0, hw) == [f"{other}:{o}".encode() for o in range(hw)]


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("where", ["batch", "entry_header", "length"])
def test_flipped_bytes_mid_segment_read_as_error_and_the_rest_stays_readable(data_dir, caplog, clean, where):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    s.close()
    path, local, victim = _middle_of_closed_segment(data_dir)
    at = {"batch": local + E.HEADER_SIZE + 70, "entry_header": local + 30, "length": local + 1}[where]
    _flip(path, at)
    if not clean:
        (data_dir / "clean_shutdown").unlink()
    with caplog.at_level(logging.ERROR, logger="store.recovery"):
        s = Store.open(data_dir, tiny_config())
    try:
        _assert_damage_contained(s, victim)
        text = caplog.text
        assert f"topic {TOPIC} partition {victim.partition} offsets {victim.base_offset}-" \
               f"{victim.base_offset + victim.record_count - 1}" in text
        # appends continue after the damage, at fresh offsets
        hw = s.high_watermark(TOPIC, victim.partition)
        assert append(s, TOPIC, victim.partition, build_batch([b"after"])).base_offset == hw
    finally:
        s.close()


def test_damage_is_reported_again_on_every_start_and_never_truncates(data_dir, caplog):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    s.close()
    path, local, victim = _middle_of_closed_segment(data_dir)
    _flip(path, local + E.HEADER_SIZE + 70, 5)
    size_before = sum(f.stat().st_size for f in (data_dir / "commitlog").iterdir())
    for clean in (True, False, True):
        if not clean:
            (data_dir / "clean_shutdown").unlink()
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="store.recovery"):
            s = Store.open(data_dir, tiny_config())
        try:
            assert f"partition {victim.partition} offsets {victim.base_offset}-" in caplog.text
            _assert_damage_contained(s, victim)
        finally:
            s.close()
    size_after = sum(f.stat().st_size for f in (data_dir / "commitlog").iterdir())
    assert size_after >= size_before


def test_a_damaged_end_of_segment_marker_keeps_the_next_segment(data_dir):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    s.close()
    entries = _entries(data_dir)
    segments = sorted({path for path, _, _ in entries})
    path = segments[1]
    last_local, last = [(lo, e) for p, lo, e in entries if p == path][-1]
    _flip(path, last_local + last.length + 8)  # the blank marker's magic
    (data_dir / "clean_shutdown").unlink()
    s = Store.open(data_dir, tiny_config())
    try:
        for other in range(PARTITIONS):
            hw = s.high_watermark(TOPIC, other)
            assert hw == 60
            assert _values(s, other, 0, hw) == [f"{other}:{o}".encode() for o in range(hw)]
    finally:
        s.close()


def test_a_torn_tail_is_still_truncated(data_dir):
    s = Store.open(data_dir, tiny_config())
    _fill(s, 45)
    checkpoint = saved_checkpoint(s, data_dir)
    _fill(s, 45, create=False)
    hws = [s.high_watermark(TOPIC, p) for p in range(PARTITIONS)]
    s.close()
    path, local, last = _entries(data_dir)[-1]
    _flip(path, local + last.length - 3)  # the newest entry was half-written when the power went
    crash_to(data_dir, checkpoint)  # ... some time after the last checkpoint
    s = Store.open(data_dir, tiny_config())
    try:
        hws[last.partition] = last.base_offset
        assert [s.high_watermark(TOPIC, p) for p in range(PARTITIONS)] == hws
        assert append(s, TOPIC, last.partition, build_batch([b"x"])).base_offset == last.base_offset
    finally:
        s.close()


def test_key_lookup_never_decodes_a_damaged_batch(data_dir):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    s.close()
    path, local, victim = _middle_of_closed_segment(data_dir)
    _flip(path, local + E.HEADER_SIZE + 70)
    s = Store.open(data_dir, tiny_config())
    try:
        i = next(i for i in range(90) if s.lookup_key(TOPIC, b"k%d" % i, 0, 2**62) == [])
        assert i % PARTITIONS == victim.partition
        assert len([j for j in range(90) if not s.lookup_key(TOPIC, b"k%d" % j, 0, 2**62)]) == 1
    finally:
        s.close()


def test_verification_can_be_turned_off(data_dir):
    s = Store.open(data_dir, tiny_config())
    _fill(s)
    s.close()
    path, local, victim = _middle_of_closed_segment(data_dir)
    _flip(path, local + E.HEADER_SIZE + 70)
    s = Store.open(data_dir, tiny_config(verify_on_start=False))
    try:  # the trade-off: unverified bytes are served as they are (clients check batch CRCs)
        assert s.read(TOPIC, victim.partition, victim.base_offset, 1).batches
    finally:
        s.close()
