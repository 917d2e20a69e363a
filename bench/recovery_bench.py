"""Recovery benchmark: how long `gregor serve` takes to be ready after a SIGKILL, per GiB of
commitlog, and what the startup CRC check costs after a clean shutdown.

Run: .venv/bin/python bench/recovery_bench.py [--gib 1.0] [--partitions 16] [--segment-mib 64]

A writer process appends 1 KiB batches (one record each) round-robin over the partitions
directly through the store (async flush, no periodic checkpoint) until the commitlog holds
--gib GiB, then is killed with SIGKILL. The bench then times, each on the same data dir:
  1. `gregor serve` from exec until "listening" after the kill (everything follows the last
     checkpoint: scan + CRC of every entry, re-derive consume queues, replay producer state);
  2. Store.open alone on a copy of the killed state (that recovery without broker start-up);
  3. Store.open after a writer that saved a checkpoint just before it was killed (the case
     a running broker is in within checkpoint.interval.ms), with and without the CRC check;
  4. `gregor serve` after a clean stop, with commitlog.verify.on.start=true and =false.
The page cache is warm (a process kill keeps it): after a power loss add the time to read
the commitlog from disk at the device's sequential read rate. Data lives in a temporary
directory that is deleted afterwards. Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.store_bench import one_kib_batch
from protocol.record_batch import parse_header
from store import Store, StoreConfig

READY = re.compile(r"listening on [\d.]+:\d+")
TOPIC = "recovery"


def store_config(segment_mib: int, **kw) -> StoreConfig:
    return StoreConfig(segment_bytes=segment_mib << 20, retention_ms=-1, **kw)


def write_then_wait(data_dir: str, total_bytes: int, partitions: int, segment_mib: int,
                    checkpoint_at_end: bool) -> None:
    """The writer: append until `total_bytes` of batches are in, say so, then wait to be killed.
    No periodic checkpoint runs, so the last one is from the start (everything follows it) or,
    with `checkpoint_at_end`, from just before the kill (nothing does)."""
    store = Store.open(data_dir, store_config(segment_mib, checkpoint_interval_ms=3_600_000))
    store.create_topic(TOPIC, partitions, {})
    batch = one_kib_batch()
    header = parse_header(batch)
    for i in range(total_bytes // len(batch)):
        store.append(TOPIC, i % partitions, batch, header)
    if checkpoint_at_end:
        store.write_checkpoint()
    print("written", flush=True)
    time.sleep(3600)


def killed_writer(data: Path, args: argparse.Namespace, checkpoint_at_end: bool) -> float:
    """Run the writer into `data`, SIGKILL it once it has written; returns the writing seconds."""
    began = time.monotonic()
    cmd = [sys.executable, __file__, "--gib", str(args.gib), "--partitions", str(args.partitions),
           "--segment-mib", str(args.segment_mib), "--write-then-wait", str(data)]
    writer = subprocess.Popen(cmd + (["--checkpoint-at-end"] if checkpoint_at_end else []),
                              stdout=subprocess.PIPE, cwd=ROOT)
    assert writer.stdout is not None and writer.stdout.readline().strip() == b"written"
    writing = time.monotonic() - began
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    return writing


def broker_ready_seconds(data_dir: Path, segment_mib: int, log_path: Path, **settings: str) -> float:
    """Seconds from exec to "listening"; the broker is stopped cleanly afterwards."""
    args = [sys.executable, "-m", "broker", "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1",
            "--port", "0", "--set", f"commitlog.segment.bytes={segment_mib << 20}",
            "--set", "log.retention.ms=-1", "--log-level", "INFO"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    with open(log_path, "ab") as log:
        seen = log_path.stat().st_size
        began = time.monotonic()
        proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=log)
        try:
            deadline = began + 1800
            while not READY.search(log_path.read_bytes()[seen:].decode(errors="replace")):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"broker did not start:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.02)
            return time.monotonic() - began
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--write-then-wait", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint-at-end", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    total = int(args.gib * (1 << 30))
    if args.write_then_wait:
        write_then_wait(args.write_then_wait, total, args.partitions, args.segment_mib, args.checkpoint_at_end)
        return
    tmp = Path(tempfile.mkdtemp(prefix="gregor-recovery-"))
    try:
        data = tmp / "data"
        writing = killed_writer(data, args, checkpoint_at_end=False)
        gib = sum(p.stat().st_size for p in (data / "commitlog").iterdir()) / (1 << 30)
        print(f"wrote {total / (1 << 30):.2f} GiB of 1 KiB batches over {args.partitions} partitions "
              f"in {writing:.1f} s; commitlog {gib:.2f} GiB in {args.segment_mib} MiB segments; SIGKILL")
        copy = tmp / "copy"
        shutil.copytree(data, copy)
        log = tmp / "broker.log"
        log.touch()
        killed = broker_ready_seconds(data, args.segment_mib, log)
        print(f"broker ready after SIGKILL: {killed:.1f} s ({killed / args.gib:.1f} s per GiB)")
        began = time.monotonic()
        Store.open(copy, store_config(args.segment_mib)).close()
        rebuild = time.monotonic() - began
        print(f"Store.open alone, all {args.gib:g} GiB written after the last checkpoint: {rebuild:.1f} s "
              f"({rebuild / args.gib:.1f} s per GiB re-derived)")
        shutil.rmtree(copy)
        after = tmp / "after-checkpoint"
        killed_writer(after, args, checkpoint_at_end=True)
        began = time.monotonic()
        Store.open(after, store_config(args.segment_mib)).close()
        quick = time.monotonic() - began
        print(f"Store.open alone, the {args.gib:g} GiB written before the last checkpoint: {quick:.1f} s "
              f"(of which the CRC check of the whole commitlog, commitlog.verify.on.start)")
        began = time.monotonic()
        Store.open(after, store_config(args.segment_mib, verify_on_start=False)).close()
        print(f"  the same after a clean stop without the CRC check: {time.monotonic() - began:.1f} s")
        verified = broker_ready_seconds(data, args.segment_mib, log)
        print(f"broker ready after clean stop, commitlog.verify.on.start=true: {verified:.1f} s "
              f"({verified / args.gib:.1f} s per GiB)")
        unverified = broker_ready_seconds(data, args.segment_mib, log, **{"commitlog.verify.on.start": "false"})
        print(f"broker ready after clean stop, commitlog.verify.on.start=false: {unverified:.1f} s")
        for line in log.read_text().splitlines():
            if "verified" in line or "rebuilt" in line or "replayed" in line or "recovered" in line:
                print("  log:", line.strip()[-140:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
