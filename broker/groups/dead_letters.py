"""Share groups' dead-letter topics (KIP-1191; Kafka 4.4's ShareGroupDLQManager; RocketMQ's %DLQ%
topics): a record a member REJECTs, or one archived past `share.delivery.count.limit`, is written to
the group's `errors.deadletterqueue.topic.name` with headers naming where it came from, and, with
`errors.deadletterqueue.copy.record.enable`, its key, value and headers copied.

As Kafka 4.4: the topic must have the topic config `errors.deadletterqueue.group.enable=true`
(created so when `errors.deadletterqueue.auto.create.topics.enable` is set and it does not exist),
its name must start with the broker's `errors.deadletterqueue.topic.name.prefix` ("dlq.") and not
with "__"; writing is best effort, after the archiving is durable: a record that cannot be written
there is logged and stays archived. The batch is appended to the commitlog like a producer's, so a
broker group's followers receive it by the same path."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.groups.share_partition import REJECTED
from protocol.record_batch import parse_header
from store import StoreError
from store.records import decode

if TYPE_CHECKING:
    from broker.topology import Topology
    from store.store import Store

log = logging.getLogger("gregor.dlq")
ENABLE = "errors.deadletterqueue.group.enable"  # the topic config that lets a topic be a DLQ
CAUSES = {REJECTED: "Offset rejected by client.", 2: "Offset delivery count exceeded the threshold."}


def name_problem(name: str) -> str | None:
    """Kafka's refusal of a group's DLQ topic name when the group config is set; None if acceptable
    (the broker's prefix is checked when a record is to be written, as Kafka 4.4 checks it)."""
    if name.startswith("__"):
        return "DLQ topic name must not start with '__'"
    return None


class DeadLetters:
    def __init__(self, store: Store, topology: Callable[[], Topology], auto_create: bool, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        self._topology = topology  # the broker's current one (a broker group's node replaces the first)
        self.auto_create = auto_create

    async def send(self, group: str, dlq: str, copy: bool, topic: str, partition: int,
                   dead: list[tuple[int, int, int]]) -> int:
        """Write `dead` (offset, delivery count, cause) of topic-partition to `dlq`; how many."""
        if self.prefix and not dlq.startswith(self.prefix):
            log.warning("group %s: %d record(s) of %s-%d not written to dead-letter topic %s: its name does not start "
                        "with errors.deadletterqueue.topic.name.prefix %r", group, len(dead), topic, partition, dlq,
                        self.prefix)
            return 0
        meta = self.store.topics().get(dlq)
        if meta is None and self.auto_create:
            try:
                meta = await self._topology().create_topic(dlq, 1, {ENABLE: "true"})
            except Exception as exc:  # noqa: BLE001 - another client may have created it meanwhile
                meta = self.store.topics().get(dlq)
                if meta is None:
                    log.warning("group %s: dead-letter topic %s not created: %s", group, dlq, exc)
                    return 0
        if meta is None or meta.configs.get(ENABLE) != "true":
            log.warning("group %s: %d record(s) of %s-%d not written to dead-letter topic %s: %s", group,
                        len(dead), topic, partition, dlq,
                        "it does not exist" if meta is None else f"its {ENABLE} is not true")
            return 0
        target = partition % meta.partitions
        if not self._topology().takes_writes(dlq, target):
            log.warning("group %s: dead-letter topic %s-%d is written by another broker group's master; "
                        "%d record(s) not written", group, dlq, target, len(dead))
            return 0
        try:
            originals = await trio.to_thread.run_sync(self._originals, topic, partition, dead) if copy else {}
            batch = _batch(group, topic, partition, dead, originals)
            await trio.to_thread.run_sync(self.store.append, dlq, target, batch, parse_header(batch))
        except StoreError as exc:
            log.warning("group %s: %d record(s) not written to dead-letter topic %s: %s", group, len(dead), dlq, exc)
            return 0
        self._topology().appended()
        return len(dead)

    def _originals(self, topic: str, partition: int, dead: list[tuple[int, int, int]]) -> dict[int, tuple]:
        """key, value, headers of each dead record still in the log (blocking: reads batches)."""
        wanted = {offset for offset, _, _ in dead}
        found: dict[int, tuple] = {}
        for offset in sorted(wanted):
            if offset in found:
                continue
            try:
                batches = self.store.read(topic, partition, offset, 1 << 20, False).batches
            except StoreError:
                continue
            for batch in batches[:1]:
                for record in decode(batch):
                    if record.offset in wanted:
                        found[record.offset] = (record.key, record.value, list(record.headers))
        return found


def _batch(group: str, topic: str, partition: int, dead: list[tuple[int, int, int]],
           originals: dict[int, tuple]) -> bytes:
    """One RecordBatch v2 (kafka-python's builder) of the dead records, headers as Kafka 4.4 writes
    them (UTF-8 strings)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    now = int(time.time() * 1000)
    for i, (offset, count, cause) in enumerate(dead):
        key, value, headers = originals.get(offset, (None, None, []))
        context = [("__dlq.errors.topic", topic.encode()), ("__dlq.errors.partition", str(partition).encode()),
                   ("__dlq.errors.offset", str(offset).encode()), ("__dlq.errors.group", group.encode()),
                   ("__dlq.errors.delivery.count", str(count).encode()),
                   ("__dlq.errors.message", CAUSES[cause].encode())]
        builder.append(i, timestamp=now, key=key, value=value, headers=list(headers) + context)
    return bytes(builder.build())
