"""confluent-kafka (librdkafka) adapter: Producer, Consumer and AdminClient in this process.

Producers use `partitioner=murmur2_random`, the setting Kafka's documentation gives for keyed
messages to land where the Java client puts them (librdkafka's own default is consistent_random).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka import errors as kafka_errors

from compat_tests.clients import (
    DEFAULT_REPLICATION,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ClientError,
    Delivery,
    GroupDescription,
    PollingMember,
    Record,
    ShareDelivery,
    Unsupported,
)

try:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        OFFSET_END,
        AcknowledgeType,
        Consumer,
        IsolationLevel,
        KafkaError,
        KafkaException,
        Producer,
        ShareConsumer,
        TopicPartition,
    )
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )
except ImportError:  # reported by require()
    Consumer = None

# librdkafka's local (negative) error codes that stand for a Kafka error.
_LOCAL = {"_AUTO_OFFSET_RESET": "OFFSET_OUT_OF_RANGE", "_MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
          "_UNKNOWN_TOPIC": "UNKNOWN_TOPIC_OR_PARTITION", "_UNKNOWN_PARTITION": "UNKNOWN_TOPIC_OR_PARTITION",
          "_INVALID_ARG": "INVALID_ARG", "_FENCED": "PRODUCER_FENCED"}
_RESETS = {None: "earliest", "earliest": "earliest", "latest": "latest", "none": "error"}


def require() -> None:
    if Consumer is None:
        pytest.skip("confluent-kafka not installed (pip install -e '.[test]')")


def error_code(err: KafkaError) -> str:
    """Broker errors carry the Kafka code; local ones are mapped by name."""
    if err.code() >= 0:
        return kafka_errors.for_code(err.code()).message
    return _LOCAL.get(err.name(), err.name())


def _raise(exc: KafkaException) -> None:
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is None:
        raise ClientError(type(exc).__name__, repr(exc)) from exc
    raise ClientError(error_code(err), err.str()) from exc


def _record(m) -> Record:
    return Record(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


class Client:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def _admin_result(self, futures: dict):
        try:
            return {k: f.result(20) for k, f in futures.items()}
        except KafkaException as e:
            _raise(e)

    def produce(self, topic, messages, *, codec="none", idempotent=True, max_request_bytes=None):
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": idempotent,
                             "acks": "all" if idempotent else "1", "compression.type": codec, "linger.ms": 5,
                             "partitioner": "murmur2_random", "message.max.bytes": max_request_bytes or 1000000,
                             "message.timeout.ms": 30000,
                             "topic.metadata.propagation.max.ms": 5000})
        reports: list[tuple] = [None] * len(messages)

        def report(i):
            return lambda err, msg: reports.__setitem__(i, (err, msg.partition(), msg.offset()))

        try:
            for i, m in enumerate(messages):
                extra = {"partition": m.partition} if m.partition is not None else {}
                producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers) or None,
                                 timestamp=m.timestamp or 0, on_delivery=report(i), **extra)
                producer.poll(0)
        except KafkaException as e:
            _raise(e)
        remaining = producer.flush(40)
        if remaining:
            raise ClientError("REQUEST_TIMED_OUT", f"{remaining} messages undelivered after 40 s")
        for err, _, _ in reports:
            if err is not None:
                raise ClientError(error_code(err), err.str())
        return [Delivery(p, o) for _, p, o in reports]

    def _consumer(self, group: str | None, reset: str | None, isolation: str = READ_UNCOMMITTED) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group or f"compat-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": _RESETS[reset],
                         "isolation.level": isolation,
                         "fetch.wait.max.ms": 100, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})

    def consume(self, topic, partitions, start, *, count=None, reset=None, timeout=20.0,
                isolation=READ_UNCOMMITTED):
        consumer = self._consumer(None, reset, isolation)
        got: list[Record] = []
        try:
            if start == "earliest" or start == "latest":
                offsets = {p: OFFSET_BEGINNING if start == "earliest" else OFFSET_END for p in partitions}
            elif isinstance(start, str) and start.startswith("time:"):
                found = consumer.offsets_for_times([TopicPartition(topic, p, int(start[5:])) for p in partitions],
                                                   timeout=15)
                offsets = {tp.partition: OFFSET_END if tp.offset < 0 else tp.offset for tp in found}
            else:
                offsets = {p: int(start) for p in partitions}
            ends = None
            if count is None:
                ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                        for p in partitions}
            consumer.assign([TopicPartition(topic, p, o) for p, o in offsets.items()])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if count is not None and len(got) >= count:
                    break
                if ends is not None and all(tp.offset >= ends[tp.partition] or
                                            (tp.offset < 0 and ends[tp.partition] == 0)
                                            for tp in consumer.position(
                                                [TopicPartition(topic, p) for p in partitions])):
                    break
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    raise ClientError(error_code(msg.error()), msg.error().str())
                got.append(_record(msg))
        except KafkaException as e:
            _raise(e)
        finally:
            consumer.close()
        return got

    def list_offset(self, topic, partition, timestamp, *, isolation=READ_UNCOMMITTED):
        spec = {-1: OffsetSpec.latest(), -2: OffsetSpec.earliest(), -3: OffsetSpec.max_timestamp()}.get(
            timestamp) or OffsetSpec.for_timestamp(timestamp)
        tp = TopicPartition(topic, partition)
        level = IsolationLevel.READ_COMMITTED if isolation == READ_COMMITTED else IsolationLevel.READ_UNCOMMITTED
        [info] = self._admin_result(self.admin.list_offsets({tp: spec}, isolation_level=level)).values()
        return (info.offset, info.timestamp)

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=60000):
        return _TransactionalProducer(Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": transactional_id,
            "transaction.timeout.ms": transaction_timeout_ms, "linger.ms": 5}))

    def transform(self, group, source, sink, count, *, commit, prefix=b"out-"):
        consumer = self._consumer(group, "earliest", READ_COMMITTED)
        producer = _TransactionalProducer(Producer({"bootstrap.servers": self.bootstrap,
                                                    "transactional.id": f"{group}-txn", "linger.ms": 5}))
        read: list = []
        try:
            consumer.subscribe([source])
            deadline = time.monotonic() + 30
            while len(read) < count and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    read.append(msg)
            if len(read) < count:
                raise ClientError("TIMEOUT", f"read {len(read)} of {count} records of {source} in 30 s")
            producer.begin()
            for m in read:
                producer.producer.produce(sink, key=m.key(), value=prefix + m.value(), partition=m.partition())
            if producer.producer.flush(30):  # abort_transaction purges what is still unsent
                raise ClientError("TIMEOUT", f"{sink}: output undelivered after 30 s")
            ends = {(m.topic(), m.partition()): m.offset() + 1 for m in read}
            producer.call(producer.producer.send_offsets_to_transaction,
                          [TopicPartition(t, p, o) for (t, p), o in ends.items()],
                          consumer.consumer_group_metadata(), 30)
            if commit:
                producer.commit()
            else:
                producer.abort()
        except KafkaException as e:
            _raise(e)
        finally:
            producer.close()
            consumer.close()
        return [_record(m) for m in read]

    def group_consume(self, group, topic, count):
        consumer = self._consumer(group, "earliest")
        consumer.subscribe([topic])
        got: list[Record] = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < count and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                got.append(_record(msg))
                consumer.commit(message=msg, asynchronous=False)
        finally:
            consumer.close()
        return got

    def committed(self, group, topic, partitions):
        consumer = self._consumer(group, None)
        try:
            found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=15)
        except KafkaException as e:
            _raise(e)
        finally:
            consumer.close()
        return {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in found}

    def start_member(self, group, topic, protocol: str | None = None):
        """`protocol`: the group protocol ("classic", "consumer"); else the client's default, classic."""
        if protocol == "consumer":  # its timings are the broker's (group.consumer.*): the client may not set them
            consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "group.protocol": "consumer",
                                 "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                 "fetch.wait.max.ms": 100})
        else:
            consumer = self._consumer(group, "earliest")
        consumer.subscribe([topic])
        return _Member(consumer)

    def create_topic(self, topic, partitions=1, configs=None):
        self._admin_result(self.admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=DEFAULT_REPLICATION,
                      config=dict(configs or {}))],
            operation_timeout=15))

    def topic_configs(self, topic):
        [entries] = self._admin_result(
            self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])).values()
        return {name: entry.value for name, entry in entries.items()}

    def create_partitions(self, topic, total):
        self._admin_result(self.admin.create_partitions([NewPartitions(topic, total)]))

    def partition_count(self, topic):
        meta = self.admin.list_topics(topic=topic, timeout=15).topics[topic]
        if meta.error is not None:
            raise ClientError(error_code(meta.error), meta.error.str())
        return len(meta.partitions)

    def delete_topic(self, topic):
        self._admin_result(self.admin.delete_topics([topic], operation_timeout=15))

    def list_topics(self):
        return set(self.admin.list_topics(timeout=15).topics)

    def list_groups(self):
        try:
            result = self.admin.list_consumer_groups(request_timeout=15).result(20)
        except KafkaException as e:
            _raise(e)
        return {g.group_id for g in result.valid}

    def describe_group(self, group):
        [d] = self._admin_result(self.admin.describe_consumer_groups([group], request_timeout=15)).values()
        members = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
        return GroupDescription(_state_name(d.state), members)


    def share_member(self, group, topic, *, explicit=False, reject=(), release=(), release_always=(), renew=(),
                     hold=False, count=None, linger=0.0, timeout=60.0):
        if renew:
            raise Unsupported("confluent-kafka 2.16's AcknowledgeType has no RENEW")
        config = {"bootstrap.servers": self.bootstrap, "group.id": group}
        if explicit:
            config["share.acknowledgement.mode"] = "explicit"
        consumer = ShareConsumer(config)
        consumer.subscribe([topic])
        return _ShareMember(consumer, explicit, set(reject), set(release), set(release_always), hold, count,
                            linger, timeout)


class _ShareMember(threading.Thread):
    """A ShareConsumer polled on a thread of its own, acknowledging as share_member was told."""

    def __init__(self, consumer, explicit, reject, release, release_always, hold, count, linger, timeout) -> None:
        super().__init__(daemon=True)
        self.consumer = consumer
        self.explicit, self.hold = explicit, hold
        self.reject, self.release, self.release_always = reject, release, release_always
        self.count, self.linger, self.deadline = count, linger, time.monotonic() + timeout
        self._halt = threading.Event()
        self._deliveries: list[ShareDelivery] = []
        self.error: ClientError | None = None
        self.start()

    def _acknowledge(self, m) -> None:
        first = m.delivery_count() == 1
        if m.value() in self.reject:
            kind = AcknowledgeType.REJECT
        elif m.value() in self.release_always or m.value() in self.release and first:
            kind = AcknowledgeType.RELEASE
        else:
            kind = AcknowledgeType.ACCEPT
        self.consumer.acknowledge(m, kind)

    def run(self) -> None:
        end = self.deadline
        try:
            while not self._halt.is_set() and time.monotonic() < end:
                messages = self.consumer.poll(0.2) or []
                for m in messages:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    self._deliveries.append(ShareDelivery(m.value(), m.delivery_count(), m.offset()))
                    if self.explicit and not self.hold:
                        self._acknowledge(m)
                if self.hold and messages:  # acquired, never acknowledged: no more polls until stopped
                    self._halt.wait(max(0.0, self.deadline - time.monotonic()))
                    break
                if self.explicit and messages:
                    self.consumer.commit_sync()
                if self.count is not None and len(self._deliveries) >= self.count and end == self.deadline:
                    end = min(self.deadline, time.monotonic() + self.linger)
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            self.error = ClientError(error_code(err) if err else type(e).__name__, str(e))
        finally:
            self.consumer.close()

    def deliveries(self):
        return list(self._deliveries)

    def wait(self, timeout):
        self.join(timeout)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        if self.error is not None:
            raise self.error


class _TransactionalProducer:
    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.call(producer.init_transactions, 60)

    @staticmethod
    def call(method, *args) -> None:
        try:
            method(*args)
        except KafkaException as e:
            _raise(e)

    def begin(self):
        self.call(self.producer.begin_transaction)

    def send(self, topic, messages):
        errors = []

        def report(err, _msg):
            if err is not None:
                errors.append(err)

        try:
            for m in messages:
                extra = {"partition": m.partition} if m.partition is not None else {}
                self.producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers) or None,
                                      timestamp=m.timestamp or 0, on_delivery=report, **extra)
            remaining = self.producer.flush(30)
        except KafkaException as e:
            _raise(e)
        except SystemError as e:
            # a fatal error (fenced) raised while delivery reports run: the binding calls the
            # report with that exception still set, and Python complains about the callback
            if not isinstance(e.__cause__, KafkaException):
                raise
            _raise(e.__cause__)
        if remaining:
            raise ClientError("TIMEOUT", f"{remaining} messages undelivered after 30 s")
        if errors:
            raise ClientError(error_code(errors[0]), errors[0].str())

    def commit(self):
        self.call(self.producer.commit_transaction, 30)

    def abort(self):
        self.call(self.producer.abort_transaction, 30)

    def abandon(self):
        """librdkafka has no crash; the producer is left running, never told to end the transaction."""

    def close(self):
        self.producer = None  # librdkafka's destroy; no flush, no abort


def _state_name(state) -> str:
    """ConsumerGroupState.STABLE -> 'Stable', as Kafka and the other clients spell it."""
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCE": "PreparingRebalance", "COMPLETING_REBALANCE": "CompletingRebalance"}.get(
        name, name.capitalize())


class _Member(PollingMember):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        super().__init__()

    def poll_once(self):
        msg = self.consumer.poll(0.2)
        records = []
        if msg is not None and msg.error() is None:
            records.append(_record(msg))
            try:
                self.consumer.commit(message=msg, asynchronous=False)
            except KafkaException:
                pass  # a rebalance is under way; the next poll rejoins
        return records, {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()
