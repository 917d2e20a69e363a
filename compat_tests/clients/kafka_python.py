"""kafka-python 3.x adapter: KafkaProducer, KafkaConsumer and KafkaAdminClient in this process."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic, OffsetSpec
from kafka.structs import OffsetAndMetadata

from compat_tests.clients import (
    DEFAULT_REPLICATION,
    READ_UNCOMMITTED,
    ClientError,
    Delivery,
    GroupDescription,
    PollingMember,
    Record,
    Unsupported,
)

_SPECS = {-1: OffsetSpec.LATEST, -2: OffsetSpec.EARLIEST, -3: OffsetSpec.MAX_TIMESTAMP}
_RESETS = {None: "earliest", "earliest": "earliest", "latest": "latest", "none": "none"}


def require() -> None:
    """kafka-python is a runtime dependency of Gregor: always present."""


def error_code(exc: BaseException) -> str:
    """The Kafka error name of a kafka-python error (its `message`), else the class name."""
    if isinstance(exc, kafka_errors.KafkaError) and getattr(exc, "errno", None) is not None:
        return exc.message
    return type(exc).__name__


def _record(r) -> Record:
    return Record(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)


class Client:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000)

    def _admin_call(self, fn):
        admin = self._admin()
        try:
            return fn(admin)
        except kafka_errors.KafkaError as e:
            raise ClientError(error_code(e), repr(e)) from e
        finally:
            admin.close()

    def produce(self, topic, messages, *, codec="none", idempotent=True, max_request_bytes=None):
        if any(m.key is None and m.value is None for m in messages):
            raise Unsupported("KafkaProducer.send refuses a message whose key and value are both null")
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, compression_type=None if codec == "none" else codec,
            enable_idempotence=idempotent, acks="all" if idempotent else 1, linger_ms=5,
            max_request_size=max_request_bytes or 1048576, request_timeout_ms=15000, max_block_ms=5000)
        try:
            futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers),
                                     partition=m.partition, timestamp_ms=m.timestamp) for m in messages]
            producer.flush(30)
            metas = [f.get(timeout=30) for f in futures]
        except kafka_errors.KafkaError as e:
            raise ClientError(error_code(e), repr(e)) from e
        finally:
            producer.close(5)
        return [Delivery(m.partition, m.offset) for m in metas]

    def consume(self, topic, partitions, start, *, count=None, reset=None, timeout=20.0,
                isolation=READ_UNCOMMITTED):
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                 auto_offset_reset=_RESETS[reset], fetch_max_wait_ms=100, isolation_level=isolation,
                                 max_partition_fetch_bytes=2 << 20, request_timeout_ms=15000)
        tps = [TopicPartition(topic, p) for p in partitions]
        got: list[Record] = []
        try:
            consumer.assign(tps)
            if start == "earliest":
                consumer.seek_to_beginning(*tps)
            elif start == "latest":
                consumer.seek_to_end(*tps)
            elif isinstance(start, str) and start.startswith("time:"):
                found = consumer.offsets_for_times({tp: int(start[5:]) for tp in tps})
                for tp in tps:
                    if found[tp] is None:
                        consumer.seek_to_end(tp)
                    else:
                        consumer.seek(tp, found[tp].offset)
            else:
                for tp in tps:
                    consumer.seek(tp, int(start))
            ends = consumer.end_offsets(tps) if count is None else None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if count is not None and len(got) >= count:
                    break
                if ends is not None and all(consumer.position(tp) >= ends[tp] for tp in tps):
                    break
                for batch in consumer.poll(200).values():
                    got.extend(_record(r) for r in batch)
        except kafka_errors.KafkaError as e:
            raise ClientError(error_code(e), repr(e)) from e
        finally:
            consumer.close()
        return got[:count] if count is not None else got

    def list_offset(self, topic, partition, timestamp, *, isolation=READ_UNCOMMITTED):
        tp = TopicPartition(topic, partition)
        spec = _SPECS.get(timestamp, timestamp)
        found = self._admin_call(lambda a: a.list_partition_offsets({tp: spec}, isolation_level=isolation))[tp]
        return (-1, -1) if found is None else (found.offset, found.timestamp)

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=60000):
        return _TransactionalProducer(KafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms, linger_ms=5, request_timeout_ms=15000,
            max_block_ms=30000))

    def transform(self, group, source, sink, count, *, commit, prefix=b"out-"):
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", isolation_level="read_committed",
                                 fetch_max_wait_ms=100, session_timeout_ms=10000, heartbeat_interval_ms=500)
        producer = self.transactional_producer(f"{group}-txn")
        read: list = []
        try:
            consumer.subscribe([source])
            deadline = time.monotonic() + 30
            while len(read) < count and time.monotonic() < deadline:
                for batch in consumer.poll(200, max_records=count - len(read)).values():
                    read.extend(batch)
            if len(read) < count:
                raise ClientError("TIMEOUT", f"read {len(read)} of {count} records of {source} in 30 s")
            producer.begin()
            futures = [producer.producer.send(sink, key=r.key, value=prefix + r.value, partition=r.partition)
                       for r in read]
            producer.producer.flush(30)
            for f in futures:
                f.get(timeout=30)
            ends = {TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1) for r in read}
            producer.producer.send_offsets_to_transaction(ends, consumer.group_metadata())
            if commit:
                producer.commit()
            else:
                producer.abort()
        except kafka_errors.KafkaError as e:
            raise ClientError(error_code(e), repr(e)) from e
        finally:
            producer.close()
            consumer.close()
        return [_record(r) for r in read]

    def _group_consumer(self, group: str, topic: str) -> KafkaConsumer:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                 session_timeout_ms=10000, heartbeat_interval_ms=500)
        # The topic's metadata before joining: kafka-python 3.0.12, as leader of a group it joined
        # before its first metadata answer, assigns nothing, rejoins once the metadata comes and
        # then spins in its poll loop without fetching or heartbeating (seen against a 3-node
        # Kafka 3.9, where that order is common). A client bug, not a broker behaviour.
        consumer.partitions_for_topic(topic)
        consumer.subscribe([topic])
        return consumer

    def group_consume(self, group, topic, count):
        consumer = self._group_consumer(group, topic)
        got: dict[tuple[int, int], Record] = {}  # by (partition, offset): a rebalance delivers records again
        deadline = time.monotonic() + 30
        committed = False
        try:
            while (len(got) < count or not committed) and time.monotonic() < deadline:
                for batch in consumer.poll(200, max_records=max(count - len(got), 1)).values():
                    for r in batch:
                        got.setdefault((r.partition, r.offset), _record(r))
                if not got:
                    continue
                # What was read, named: commit() without offsets commits the current assignment's
                # positions, which are empty after a rebalance that revoked what was read (CI, against
                # a 3-node Kafka: the test then saw nothing committed)
                ends = {TopicPartition(topic, p): OffsetAndMetadata(o + 1, "", -1)
                        for (p, o) in sorted(got)}  # in offset order: each partition's last record wins
                try:
                    consumer.commit(ends)
                    committed = True
                except (kafka_errors.RebalanceInProgressError, kafka_errors.CommitFailedError):
                    # kafka-python rejoins its group when it sees a new topic's metadata change (CI, against
                    # Kafka): the next poll completes the rebalance and the commit is tried again
                    committed = False
        finally:
            consumer.close()
        return list(got.values())

    def committed(self, group, topic, partitions):
        offsets = self._admin_call(lambda a: a.list_group_offsets({group: None})).get(group, {})
        by_partition = {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}
        return {p: by_partition.get(p, -1) for p in partitions}

    def share_member(self, group, topic, **_):
        raise Unsupported("kafka-python has no share-group consumer (KIP-932)")

    def start_member(self, group, topic):
        return _Member(self._group_consumer(group, topic))

    def create_topic(self, topic, partitions=1, configs=None):
        new = NewTopic(topic, partitions, DEFAULT_REPLICATION, topic_configs=dict(configs or {}))
        self._admin_call(lambda a: a.create_topics([new]))

    def topic_configs(self, topic):
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        found = self._admin_call(lambda a: a.describe_configs([resource], config_filter="all"))
        return {k: v["value"] for k, v in found["topic"][topic].items()}

    def create_partitions(self, topic, total):
        self._admin_call(lambda a: a.create_partitions({topic: NewPartitions(total)}))

    def partition_count(self, topic):
        [described] = self._admin_call(lambda a: a.describe_topics([topic]))
        if described["error_code"]:
            raise ClientError(kafka_errors.for_code(described["error_code"]).message, repr(described))
        return len(described["partitions"])

    def delete_topic(self, topic):
        self._admin_call(lambda a: a.delete_topics([topic]))

    def list_topics(self):
        return set(self._admin_call(lambda a: a.list_topics()))

    def list_groups(self):
        return {g["group_id"] for g in self._admin_call(lambda a: a.list_groups())}

    def describe_group(self, group):
        d = self._admin_call(lambda a: a.describe_groups([group]))[group]
        members = {}
        for m in d["members"]:
            assignment = m.get("member_assignment") or {}
            members[m["member_id"]] = {p for t in assignment.get("assigned_partitions", []) for p in t["partitions"]}
        return GroupDescription(d["group_state"], members)


class _TransactionalProducer:
    def __init__(self, producer: KafkaProducer) -> None:
        self.producer = producer
        self._call(producer.init_transactions)

    def _call(self, method, *args):
        try:
            return method(*args)
        except kafka_errors.KafkaError as e:
            raise ClientError(error_code(e), repr(e)) from e

    def begin(self):
        self._call(self.producer.begin_transaction)

    def send(self, topic, messages):
        def send_all():
            futures = [self.producer.send(topic, key=m.key, value=m.value, headers=list(m.headers),
                                          partition=m.partition, timestamp_ms=m.timestamp) for m in messages]
            self.producer.flush(30)
            for f in futures:
                f.get(timeout=30)

        self._call(send_all)

    def commit(self):
        self._call(self.producer.commit_transaction)

    def abort(self):
        self._call(self.producer.abort_transaction)

    def abandon(self):
        """An in-process producer cannot crash: it is left running, never told to end the transaction."""

    def close(self):
        try:
            self.producer.close(timeout=0)
        except kafka_errors.KafkaError:
            pass  # a fenced producer may complain; it is closed either way


class _Member(PollingMember):
    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        super().__init__()

    def poll_once(self):
        # Long enough for a whole rebalance inside one poll (it returns early with records):
        # kafka-python 3.0.12 drops a JoinGroup/SyncGroup that completes after its poll() timed
        # out and joins again, which under load can repeat every generation.
        try:
            records = [_record(r) for batch in self.consumer.poll(3000).values() for r in batch]
            try:
                self.consumer.commit()
            except (kafka_errors.CommitFailedError, kafka_errors.RebalanceInProgressError):
                pass  # a rebalance is under way; the next poll rejoins
            return records, {tp.partition for tp in self.consumer.assignment()}
        except kafka_errors.KafkaError as e:
            raise ClientError(error_code(e), repr(e)) from e

    def close(self) -> None:
        self.consumer.close()
