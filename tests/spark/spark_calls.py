"""Spark 4.x's Kafka source and sink, reduced to their calls on the Java kafka-clients.

Each function mirrors one piece of apache/spark connector/kafka-0-10-sql/src/main/scala/org/apache/
spark/sql/kafka010/ and names it; the tests run these against Gregor so that every request Spark's
connector would make is made, in the same order, with the same configuration:

- driver:   ConsumerStrategy.scala (SubscribeStrategy.assignedTopicPartitions: describeTopics) and
            KafkaOffsetReaderAdmin.scala (fetchEarliestOffsets / fetchLatestOffsets /
            fetchSpecificTimestampBasedOffsets / fetchGlobalTimestampBasedOffsets: listOffsets with
            ListOffsetsOptions(READ_UNCOMMITTED) and OffsetSpec earliest / latest / forTimestamp);
- executor: consumer/KafkaDataConsumer.scala (InternalKafkaConsumer.fetch: seek, poll, position,
            getAvailableOffsetRange = seekToBeginning + position + seekToEnd + position; and
            KafkaDataConsumer.get / fetchRecord with failOnDataLoss=true, which treats a gap above
            the earliest offset as invisible records and skips it);
- sink:     KafkaWriteTask.scala (sendRow: ProducerRecord(topic, partition, timestamp, key, value,
            headers) with a callback that keeps the first error; close: flush, then check errors).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.spark.kafka_jvm import KafkaJvm, Record

LATEST = -1  # KafkaOffsetRangeLimit.LATEST
EARLIEST = -2  # KafkaOffsetRangeLimit.EARLIEST
UNKNOWN_OFFSET = -2  # KafkaDataConsumer.UNKNOWN_OFFSET
NO_MATCH = -1  # OffsetFetchResponse.INVALID_OFFSET: forTimestamp found no record


class DataLoss(Exception):
    """What Spark raises (couldNotReadOffsetRangeInKafkaError) with failOnDataLoss=true."""


class OffsetOutOfRange(Exception):
    """InternalKafkaConsumer.fetch: nothing polled and the offset is outside [earliest, latest)."""


class PollTimeout(Exception):
    """InternalKafkaConsumer.fetch: nothing polled and the position did not move."""


def assigned_partitions(jvm: KafkaJvm, admin, topics: list[str]) -> list[tuple[str, int]]:
    """SubscribeStrategy.assignedTopicPartitions: admin.describeTopics(topics).allTopicNames()."""
    described = admin.describeTopics(topics).allTopicNames().get()
    return sorted((name, info.partition()) for name in topics for info in described[name].partitions())


def list_offsets(jvm: KafkaJvm, admin, specs: dict[tuple[str, int], int | str]) -> dict[tuple[str, int], tuple[int, int]]:
    """KafkaOffsetReaderAdmin.listOffsets: one Admin.listOffsets call for all partitions.

    A spec is "earliest", "latest" or a timestamp (OffsetSpec.forTimestamp). Returns
    (offset, timestamp) per partition, as ListOffsetsResultInfo carries them.
    """
    admin_pkg = jvm.kafka.clients.admin
    request = jvm.jvm.java.util.HashMap()
    keys = {}
    for (topic, partition), spec in specs.items():
        tp = jvm.topic_partition(topic, partition)
        keys[tp.toString()] = (topic, partition)
        if spec == "earliest":
            offset_spec = admin_pkg.OffsetSpec.earliest()
        elif spec == "latest":
            offset_spec = admin_pkg.OffsetSpec.latest()
        else:
            offset_spec = admin_pkg.OffsetSpec.forTimestamp(jvm.jvm.java.lang.Long.valueOf(str(spec)))
        request.put(tp, offset_spec)
    options = admin_pkg.ListOffsetsOptions(jvm.kafka.common.IsolationLevel.READ_UNCOMMITTED)
    result = admin.listOffsets(request, options).all().get()
    return {keys[tp.toString()]: (info.offset(), info.timestamp()) for tp, info in result.items()}


def offsets_for_timestamp(jvm: KafkaJvm, admin, partitions: list[tuple[str, int]], timestamp_ms: int,
                          starting: bool) -> dict[tuple[str, int], int]:
    """fetchGlobalTimestampBasedOffsets (startingTimestamp / endingTimestamp) with Spark's default
    strategy: no match is an error for a starting offset and "latest" for an ending one; "latest"
    is then resolved by a second listOffsets call, as fetchSpecificOffsets0 does."""
    found = list_offsets(jvm, admin, {tp: timestamp_ms for tp in partitions})
    offsets = {}
    for tp, (offset, _) in found.items():
        if offset == NO_MATCH and starting:
            raise ValueError(f"No offset matched from request of topic-partition {tp} and timestamp {timestamp_ms}.")
        offsets[tp] = LATEST if offset == NO_MATCH else offset
    unresolved = [tp for tp, offset in offsets.items() if offset == LATEST]
    if unresolved:
        latest = list_offsets(jvm, admin, {tp: "latest" for tp in unresolved})
        offsets.update({tp: latest[tp][0] for tp in unresolved})
    return offsets


@dataclass
class Poll:
    """What one InternalKafkaConsumer.fetch saw."""

    requested: int
    records: int
    offset_after_poll: int
    earliest: int
    latest: int


@dataclass
class ExecutorReader:
    """KafkaDataConsumer for one partition, failOnDataLoss=true (the default)."""

    jvm: KafkaJvm
    topic: str
    partition: int
    poll_timeout_ms: int = 2_000
    polls: list[Poll] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.consumer = self.jvm.executor_consumer(self.topic, self.partition)
        self.tp = self.jvm.topic_partition(self.topic, self.partition)
        self.tp_set = self.jvm.java_set([self.tp])

    def close(self) -> None:
        self.consumer.close()

    def available_offset_range(self) -> tuple[int, int]:
        """InternalKafkaConsumer.getAvailableOffsetRange."""
        self.consumer.seekToBeginning(self.tp_set)
        earliest = self.consumer.position(self.tp)
        self.consumer.seekToEnd(self.tp_set)
        return earliest, self.consumer.position(self.tp)

    def fetch(self, offset: int) -> tuple[list[Record], int, tuple[int, int]]:
        """InternalKafkaConsumer.fetch."""
        self.consumer.seek(self.tp, offset)
        polled = self.consumer.poll(self.jvm.jvm.java.time.Duration.ofMillis(self.poll_timeout_ms))
        records = self.jvm.copy_records(polled.records(self.tp))
        offset_after_poll = self.consumer.position(self.tp)
        earliest, latest = self.available_offset_range()
        self.polls.append(Poll(offset, len(records), offset_after_poll, earliest, latest))
        if not records:
            if offset < earliest or offset >= latest:
                raise OffsetOutOfRange(f"{self.topic}-{self.partition} offset {offset} not in [{earliest}, {latest})")
            if offset == offset_after_poll:
                raise PollTimeout(f"Cannot fetch record for offset {offset} in {self.poll_timeout_ms} milliseconds")
        return records, offset_after_poll, (earliest, latest)

    def read(self, start: int, until: int) -> list[Record]:
        """The records of [start, until), as KafkaBatchPartitionReader / KafkaSourceRDD would get
        them: KafkaDataConsumer.get(offset, until) per record, each fetchRecord reusing the last
        poll while it lasts."""
        out: list[Record] = []
        fetched: list[Record] = []
        index = 0
        next_in_fetched = UNKNOWN_OFFSET
        offset_after_poll = UNKNOWN_OFFSET
        earliest = UNKNOWN_OFFSET
        offset = start
        while offset < until:
            if offset != next_in_fetched or (index == len(fetched) and offset >= offset_after_poll):
                fetched, offset_after_poll, (earliest, _) = self.fetch(offset)
                index = 0
            elif index == len(fetched):  # drained; [offset, offset_after_poll) were invisible
                offset, next_in_fetched = offset_after_poll, UNKNOWN_OFFSET
                continue
            if index == len(fetched):  # polled, but everything up to offset_after_poll is invisible
                offset, next_in_fetched = offset_after_poll, UNKNOWN_OFFSET
                continue
            record = fetched[index]
            index += 1
            next_in_fetched = record.offset + 1
            if record.offset > offset:
                if earliest <= offset:  # invisible records: skip to the next visible one
                    index -= 1
                    offset = next_in_fetched = record.offset
                    continue
                raise DataLoss(f"Cannot fetch records in [{offset}, {record.offset})")
            if record.offset < offset:
                raise AssertionError(f"Tried to fetch {offset} but the returned record offset was {record.offset}")
            out.append(record)
            offset = record.offset + 1
        return out


class SinkWriter:
    """KafkaWriteTask: send every row with a callback-equivalent, flush at close, then fail on the
    first error."""

    def __init__(self, jvm: KafkaJvm) -> None:
        self.jvm = jvm
        self.producer = jvm.sink_producer()
        self.sent: list = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]],
             partition: int | None = None, timestamp_ms: int | None = None) -> None:
        record = self.jvm.producer_record(topic, partition, timestamp_ms, key, value, headers)
        self.sent.append(self.producer.send(record))

    def close(self) -> list[tuple[int, int]]:
        """flush(), then each send's (partition, offset); raises the first failed send's error."""
        try:
            self.producer.flush()
            return [(m.partition(), m.offset()) for m in (future.get() for future in self.sent)]
        finally:
            self.producer.close()
