"""Failover of a 3-node broker group under idempotent acks=all load from real clients: the
master is SIGKILLed, a new one is elected from the sync-state set, no acknowledged record is
lost or duplicated and each partition keeps its order; the old master returns, truncates what
the new master never had, catches up and rejoins the set. A master stopped cleanly (SIGTERM)
hands over at once."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import NotEnoughReplicasError

from broker.cluster.shipping import CHUNKS_IN_FLIGHT, IDLE_WAIT_S
from compat_tests.clients import CLIENT_NAMES, Message, Unsupported, make_client
from protocol.errors import ErrorCode
from tests.kit.wire import produce
from tests.kit.group import wait_described
from tests.kit.zookeeper import SESSION_TIMEOUT_MS
from tests.kit.gregor import ROOT
from tests.cluster.load import CHUNK, LoadLoop, PARTITIONS, check_log, create_topic, read_all

pytestmark = [pytest.mark.crash, pytest.mark.clients]


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_sigkill_master_under_idempotent_acks_all_load_loses_and_duplicates_nothing(broker_group, client_name):
    group = broker_group(3)
    try:
        client = make_client(client_name, group.bootstrap)
    except Unsupported as exc:
        pytest.skip(str(exc))
    topic = f"failover-{client_name}"
    create_topic(group, topic)
    load = LoadLoop(client, topic)
    load.start()
    try:
        load.wait_chunks(3, timeout=120)
        old = group.master()
        killed_at = time.monotonic()
        group.kill(old)
        new = group.master(timeout=30, other_than=old)
        failover_s = time.monotonic() - killed_at
        assert failover_s < 10, f"a new master after {failover_s:.1f} s"
        done = load.chunks_acked
        load.wait_chunks(done + 3, timeout=120)  # the client found the new master and goes on
    finally:
        load.stop_event.set()
        load.join(120)
    group.restart(old)  # truncates what the new master never had, catches up, rejoins the set
    assert sorted(group.wait_sync_state_set(3)) == [1, 2, 3]
    assert group.master() == new
    stored = read_all(group, topic)
    check_log(stored, load)
    assert len(load.acked) >= 6 * CHUNK


def test_a_master_stopped_cleanly_hands_over_at_once_under_idempotent_acks_all_load(broker_group):
    """A rolling restart: SIGTERM ends the master's ZooKeeper session as it stops, so a member of
    the sync-state set claims the next epoch at once, not after the session timeout (Kafka's
    controlled shutdown moves leadership before its broker stops)."""
    group = broker_group(3)
    client = make_client("confluent-kafka", group.bootstrap)
    topic = "clean-stop"
    create_topic(group, topic)
    load = LoadLoop(client, topic)
    load.start()
    try:
        load.wait_chunks(3, timeout=120)
        old = group.master()
        assert group.nodes[old].stop(signal.SIGTERM) == 0, group.nodes[old].log()[-3000:]
        # from the old master's exit: its drain first (until its set holds all it wrote) takes
        # longer on a loaded machine, and is not what this checks
        exited_at = time.monotonic()
        new = group.master(timeout=30, other_than=old)
        handover_s = time.monotonic() - exited_at
        assert handover_s < SESSION_TIMEOUT_MS / 2000, f"a new master {handover_s:.1f} s after the exit: the session timed out"
        done = load.chunks_acked
        load.wait_chunks(done + 3, timeout=60)
    finally:
        load.stop_event.set()
        load.join(120)
    assert "Traceback" not in group.nodes[old].log()
    group.restart(old)  # a clean stop's checkpoint: it follows the new master from where it stopped
    assert sorted(group.wait_sync_state_set(3)) == [1, 2, 3]
    assert group.master() == new
    check_log(read_all(group, topic), load)


@pytest.mark.parametrize("drain", [True, False], ids=["drained", "controlled-shutdown-off"])
def test_a_master_stopped_cleanly_first_gives_its_sync_state_set_the_acks_1_records_it_lacks(broker_group, drain):
    """controlled.shutdown.enable (the default): with both followers stopped (SIGSTOP; they stay
    in ZooKeeper and in the sync-state set), acks=1 records the master acknowledged are on the
    master alone. SIGTERM then does not hand over: the master refuses writes with
    NOT_LEADER_OR_FOLLOWER and waits until its sync-state set holds its log's end; once the
    followers run again it hands over, and the new master has every record. Turned off, the
    master hands over at once and the new master lacks them (Kafka's controlled shutdown)."""
    group = broker_group(3, **{"zookeeper.session.timeout.ms": "20000",
                               "controlled.shutdown.enable": str(drain).lower()})
    topic = "drained"
    create_topic(group, topic, partitions=1)
    client = make_client("kafka-python", group.bootstrap)
    assert client.produce(topic, [Message(b"before", partition=0)])
    group.wait_sync_state_set(3)
    old = group.master()
    followers = [n for n in group.nodes if n != old]
    values = [f"acks-1-{i:03d}".encode() for i in range(100)]
    for n in followers:
        os.kill(group.nodes[n].proc.pid, signal.SIGSTOP)
    # The master ships at most CHUNKS_IN_FLIGHT chunks a follower has not answered, and an empty
    # one every IDLE_WAIT_S: past those, what it is acknowledged stays on the master alone (what
    # was shipped before reaches a stopped follower's socket buffer and is applied once it runs).
    # Time passing on purpose: the master's idle timer fills the window, and no answer of the
    # master's says how many chunks are unanswered.
    time.sleep((CHUNKS_IN_FLIGHT + 2) * IDLE_WAIT_S + 0.3)
    try:  # straight to the master: a client's Metadata requests would wait on the stopped nodes
        assert produce(group.address(old), topic, values, acks=1) == ErrorCode.NONE  # the master alone has them
        stopped_at = time.monotonic()
        group.nodes[old].proc.send_signal(signal.SIGTERM)
        if drain:
            time.sleep(1.5)  # a negative check, time passing on purpose: the master does not stop meanwhile
            assert group.nodes[old].proc.poll() is None, "the master stopped before its followers held its log"
            assert produce(group.address(old), topic, [b"refused"], acks=1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            assert group.nodes[old].proc.wait(30) == 0
    finally:
        for n in followers:
            os.kill(group.nodes[n].proc.pid, signal.SIGCONT)
    assert group.nodes[old].proc.wait(30) == 0, group.nodes[old].log()[-3000:]  # once drained, by itself
    group.nodes[old].stop()
    new = group.master(timeout=30, other_than=old)
    handover_s = time.monotonic() - stopped_at
    assert new in followers
    log = group.nodes[old].log()
    assert "Traceback" not in log
    stored = [r.value for r in read_all(group, topic, partitions=1)[0]]
    if drain:
        assert "drained in" in log, log[-3000:]
        assert stored == [b"before", *values]
        assert handover_s < 15, f"a new master {handover_s:.1f} s after the stop: not at once once drained"
    else:
        assert stored == [b"before"]  # what the followers had: the acks=1 records were lost
    group.restart(old)  # it truncates what the new master never had (drain off) and follows
    assert sorted(group.wait_sync_state_set(3)) == [1, 2, 3]
    assert [r.value for r in read_all(group, topic, partitions=1)[0]] == stored


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean-stop", "kill"])
def test_a_follower_that_leaves_zookeeper_leaves_the_sync_state_set_without_waiting_for_the_lag_time(
        broker_group, sig):
    """A follower stopped cleanly closes its ZooKeeper session as it exits, and a killed one's
    session times out: either way the master takes it out of the sync-state set then, with its
    stream closed, rather than after replica.lag.time.max.ms (here 60 s), as Kafka's controller
    takes a broker whose session ended out of every ISR; acks=all is answered by the others
    meanwhile. Restarted, it catches up and joins again."""
    group = broker_group(3, **{"replica.lag.time.max.ms": "60000"})
    topic = "leaving"
    create_topic(group, topic, partitions=1)
    client = make_client("kafka-python", group.bootstrap)
    assert client.produce(topic, [Message(b"before", partition=0)])
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    stopped_at = time.monotonic()
    group.kill(follower, sig)
    assert sorted(group.wait_sync_state_set(2, timeout=30)) == sorted(set(group.nodes) - {follower})
    left_s = time.monotonic() - stopped_at
    assert left_s < 30, f"the follower left the set {left_s:.1f} s after it stopped"
    producer = KafkaProducer(bootstrap_servers=group.bootstrap, acks="all", retries=0, enable_idempotence=False)
    try:
        producer.send(topic, b"while-it-is-away", partition=0).get(timeout=30)
    finally:
        producer.close(5)
    group.restart(follower)
    assert sorted(group.wait_sync_state_set(3)) == [1, 2, 3]
    assert [r.value for r in read_all(group, topic, partitions=1)[0]] == [b"before", b"while-it-is-away"]


def test_returning_master_truncates_and_serves_identical_data_after_failing_over_back(broker_group):
    """Kill each master in turn until every node has led once; then every node, made master
    again, serves the same records at the same offsets."""
    group = broker_group(3)
    topic = "rotating"
    create_topic(group, topic)
    client = make_client("kafka-python", group.bootstrap)
    expected: dict[bytes, tuple[int, int]] = {}
    for round_ in range(4):
        values = [f"{round_:05d}-{i:04d}".encode() for i in range(200)]
        for v, d in zip(values, client.produce(topic, [Message(v, partition=i % PARTITIONS)
                                                       for i, v in enumerate(values)])):
            expected[v] = (d.partition, d.offset)
        old = group.master()
        group.kill(old)
        group.master(other_than=old)
        group.restart(old)
        group.wait_sync_state_set(3)
    stored = read_all(group, topic)
    found = {r.value: (p, r.offset) for p, records in stored.items() for r in records}
    assert found == expected


def test_acks_all_refused_with_not_enough_replicas_when_the_set_is_too_small(broker_group):
    """min.insync.replicas=3 with one follower dead: acks=all is refused (NOT_ENOUGH_REPLICAS)
    once the follower has left the sync-state set; acks=1 still succeeds; the follower's return
    makes acks=all succeed again."""
    group = broker_group(3, **{"replica.lag.time.max.ms": "2000"})
    topic = "min-isr"
    create_topic(group, topic, **{"min.insync.replicas": "3"})
    client = make_client("kafka-python", group.bootstrap)
    assert client.produce(topic, [Message(b"before", partition=0)])
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    group.kill(follower)
    group.wait_sync_state_set(2, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
    producer = KafkaProducer(bootstrap_servers=group.bootstrap, acks="all", retries=0, enable_idempotence=False)
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send(topic, b"refused", partition=0).get(timeout=30)
    finally:
        producer.close(5)
    assert client.produce(topic, [Message(b"acks-1", partition=0)], idempotent=False)
    group.restart(follower)
    group.wait_sync_state_set(3)
    assert client.produce(topic, [Message(b"after", partition=0)])
    values = [r.value for r in read_all(group, topic)[0]]
    assert values == [b"before", b"acks-1", b"after"]


def test_metadata_shows_master_replicas_and_sync_state_set(calm_group):
    group = calm_group
    create_topic(group, "described")
    master = group.master()
    # the admin client may ask any node, and a follower learns a new topic's placement a moment later
    part = wait_described(group.address(master), "described", PARTITIONS, whole_isr=True)[0]
    admin = KafkaAdminClient(bootstrap_servers=group.address(master))
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert part["leader_id"] == master
    assert sorted(part["replica_nodes"]) == [1, 2, 3]
    assert sorted(part["isr_nodes"]) == [1, 2, 3]
    assert cluster["controller_id"] == master
    assert sorted(b["broker_id"] for b in cluster["brokers"]) == [1, 2, 3]


def test_each_node_says_on_stderr_which_role_it_took_and_in_which_epoch(calm_group):
    """Whatever the log level (the default is WARNING), as `gregor ready` is."""
    group = calm_group
    master = group.master()
    assert re.search(rf"^gregor: node {master} is master of group a in epoch \d+ \(commitlog from \d+; "
                     rf"sync-state set \[", group.nodes[master].log(), re.M)
    for node in (n for n in group.nodes if n != master):
        assert re.search(rf"^gregor: node {node} follows master {master} of group a in epoch \d+$",
                         group.nodes[node].log(), re.M)


def test_metadata_after_the_master_dies_no_leader_then_the_new_master_before_dropping_the_old_one(broker_group):
    """Once the killed master's stream to the survivors has ended (and its replication port
    refuses them), they answer "no leader" (LEADER_NOT_AVAILABLE, leader -1, no controller)
    rather than naming it until its ZooKeeper session ends: clients keep looking for the leader
    and find the new master soon after it is elected. The first answer naming the new master
    still lists the killed node among the brokers, which leaves the list
    LISTED_AFTER_LEAVING_MS later: librdkafka decommissions a broker that leaves the list, and
    doing so in the same answer that moves its partitions sent them back to "no leader" for a
    second (docs/replication.md, Metadata)."""
    from kafka.protocol.metadata import MetadataRequest

    from broker.cluster.node import LISTED_AFTER_LEAVING_MS
    from tests.kit.wire import WireClient
    group = broker_group(3)
    create_topic(group, "moving", partitions=1)
    old = group.master()
    survivor = next(n for n in group.nodes if n != old)
    wire = WireClient(group.address(survivor))
    try:
        def ask():
            answer = wire.request(MetadataRequest[1](topics=["moving"]))
            part = answer.topics[0].partitions[0]
            return part.leader_id, {b.node_id for b in answer.brokers}, part.error_code, answer.controller_id

        deadline = time.monotonic() + 15
        while ask() != (old, {1, 2, 3}, 0, old):  # the survivor learns of the topic a moment after it is made
            assert time.monotonic() < deadline, ask()
            time.sleep(0.1)
        group.kill(old)
        deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 30
        leader, brokers, error, controller = ask()
        leaderless = []
        while leader in (old, -1):
            assert time.monotonic() < deadline, "no new master in Metadata"
            if leader == -1:
                leaderless.append((error, controller, old in brokers))
            time.sleep(0.02)
            leader, brokers, error, controller = ask()
        assert leaderless, "the survivor named the killed master until the new one was elected"
        assert set(leaderless) == {(ErrorCode.LEADER_NOT_AVAILABLE, -1, True)}, leaderless
        assert (error, controller) == (0, leader)
        assert old in brokers, "the killed node left the broker list in the answer naming the new master"
        named_at = time.monotonic()
        while old in brokers:
            assert time.monotonic() - named_at < LISTED_AFTER_LEAVING_MS / 1000 + 10, "the killed node stays listed"
            time.sleep(0.1)
            leader, brokers, _, _ = ask()
            assert leader not in (old, -1)
        assert brokers == set(group.nodes) - {old}
    finally:
        wire.close()


def test_followers_refuse_produce_and_fetch_with_not_leader(calm_group):
    """A client with stale metadata that reaches a follower is told NOT_LEADER_OR_FOLLOWER and
    re-routes; produce and fetch through a follower's address alone still work."""
    group = calm_group
    create_topic(group, "routed")
    master = group.master()
    follower = next(n for n in group.nodes if n != master)
    only_follower = make_client("kafka-python", group.address(follower))
    deliveries = only_follower.produce("routed", [Message(b"via-follower", partition=1)])
    assert deliveries[0].offset == 0
    records = only_follower.consume("routed", [1], "earliest", timeout=30)
    assert [r.value for r in records] == [b"via-follower"]


def test_create_topics_refuses_a_replication_factor_other_than_the_group_size(calm_group):
    group = calm_group
    admin = KafkaAdminClient(bootstrap_servers=group.bootstrap)
    try:
        from kafka.errors import InvalidReplicationFactorError
        for rf in (2, 4):
            with pytest.raises(InvalidReplicationFactorError):
                admin.create_topics([NewTopic(f"rf{rf}", 1, rf)])
        admin.create_topics([NewTopic("rf-default", 1, -1)])
        # the node asked may learn the new topic's placement a moment later (CI: replica_nodes [])
        [partition] = wait_described(group.bootstrap, "rf-default", 1)
        assert sorted(partition["replica_nodes"]) == [1, 2, 3]
    finally:
        admin.close()


def test_consumer_group_offsets_survive_failover(broker_group):
    """Offsets committed before the master dies are what the group resumes from."""
    group = broker_group(3)
    create_topic(group, "offsets", partitions=1)
    client = make_client("kafka-python", group.bootstrap)
    client.produce("offsets", [Message(f"m{i}".encode(), partition=0) for i in range(20)])
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    tp = TopicPartition("offsets", 0)
    consumer = KafkaConsumer(bootstrap_servers=group.bootstrap, group_id="survivors", enable_auto_commit=False)
    consumer.commit({tp: OffsetAndMetadata(12, "", -1)})
    consumer.close()
    old = group.master()
    group.kill(old)
    group.master(other_than=old)
    deadline = time.monotonic() + 60
    committed = None
    while time.monotonic() < deadline:
        consumer = KafkaConsumer(bootstrap_servers=group.bootstrap, group_id="survivors", enable_auto_commit=False)
        try:
            committed = consumer.committed(tp)
            break
        except Exception:  # noqa: BLE001 - the coordinator moves: ask again
            time.sleep(0.5)
        finally:
            consumer.close()
    assert committed == 12
    counts = defaultdict(int)
    for r in make_client("kafka-python", group.bootstrap).consume("offsets", [0], 12, timeout=30):
        counts[r.value] += 1
    assert sorted(counts) == sorted(f"m{i}".encode() for i in range(12, 20))


def test_followers_delete_the_segments_the_masters_retention_deleted(broker_group):
    """Retention runs on the master (followers write nothing of their own); followers drop the
    segments below the master's first position, so their disks do not grow without bound."""
    group = broker_group(3, **{"commitlog.segment.bytes": str(256 * 1024), "message.max.bytes": "65536",
                               "log.retention.bytes": str(512 * 1024), "log.retention.check.interval.ms": "300"})
    create_topic(group, "retained", partitions=1)
    client = make_client("kafka-python", group.bootstrap)
    for round_ in range(8):
        client.produce("retained", [Message(bytes(1000) + f"{round_}-{i}".encode(), partition=0) for i in range(200)])
    master = group.master()

    def first_segment(node: int) -> str:
        return min(p.name for p in (group.nodes[node].data_dir / "commitlog").iterdir())

    deadline = time.monotonic() + 30
    while first_segment(master) == "0" * 20:
        assert time.monotonic() < deadline, "the master's retention deleted nothing"
        time.sleep(0.3)
    client.produce("retained", [Message(b"after", partition=0)])  # the followers hear of it with the next chunk
    deadline = time.monotonic() + 30
    while any(first_segment(n) < first_segment(master) for n in group.nodes if n != master):
        assert time.monotonic() < deadline, {n: first_segment(n) for n in group.nodes}
        time.sleep(0.3)


def test_a_node_behind_the_masters_retention_or_on_an_empty_disk_copies_the_masters_log(broker_group):
    """Two followers stop; the master's retention then deletes the segments where their logs end.
    One comes back with its old data, the other on an empty disk (a replaced one): each copies the
    master's commitlog from its first position (as Kafka's follower truncates fully and fetches
    from the leader's log start), rejoins the sync-state set, and serves the same records, log
    starts and committed offsets as master."""
    group = broker_group(3, **{"commitlog.segment.bytes": str(256 * 1024), "message.max.bytes": "65536",
                               "log.retention.bytes": str(512 * 1024), "log.retention.check.interval.ms": "300",
                               "replica.lag.time.max.ms": "2000"})
    create_topic(group, "retained", partitions=2)
    client = make_client("kafka-python", group.bootstrap)
    client.produce("retained", [Message(f"early-{i}".encode(), partition=1) for i in range(3)])
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    committer = KafkaConsumer(bootstrap_servers=group.bootstrap, group_id="readers", enable_auto_commit=False)
    committer.commit({TopicPartition("retained", 1): OffsetAndMetadata(2, "", -1)})
    committer.close()
    master = group.master()
    behind, wiped = (n for n in group.nodes if n != master)
    group.kill(behind)
    group.kill(wiped)

    def segments(node: int) -> list[str]:
        return sorted(p.name for p in (group.nodes[node].data_dir / "commitlog").iterdir() if p.name.isdigit())

    their_last = segments(behind)[-1]
    to_master = make_client("kafka-python", group.address(master))  # not bootstrapped from the stopped nodes
    for round_ in range(10):
        to_master.produce("retained", [Message(bytes(1000) + f"{round_}-{i}".encode(), partition=0)
                                       for i in range(200)])
    deadline = time.monotonic() + 30
    while segments(master)[0] <= their_last:
        assert time.monotonic() < deadline, "the master's retention did not pass the stopped followers' logs"
        time.sleep(0.3)
    shutil.rmtree(group.nodes[wiped].data_dir)
    group.restart(behind)
    group.restart(wiped)
    group.wait_sync_state_set(3)
    expected = {p: [(r.offset, r.value) for r in records] for p, records in read_all(group, "retained", 2).items()}
    assert expected[1] == [] and len(expected[0]) > 0
    for node in (behind, wiped):  # each copy, made master (the only node left), serves what the first did
        others = [n for n in group.nodes if n != node]
        old = group.master()
        for other in others:
            group.kill(other)
        assert group.master(timeout=60, other_than=None if old == node else old) == node
        alone = make_client("kafka-python", group.address(node))  # the only node up
        got = {p: [(r.offset, r.value) for r in alone.consume("retained", [p], "earliest", timeout=60)]
               for p in (0, 1)}
        assert got == expected
        reader = KafkaConsumer(bootstrap_servers=group.address(node), group_id="readers", enable_auto_commit=False)
        try:
            partitions = [TopicPartition("retained", p) for p in (0, 1)]
            assert reader.beginning_offsets(partitions)[partitions[1]] == 3  # every record retention deleted
            assert reader.end_offsets(partitions)[partitions[1]] == 3
            assert reader.committed(partitions[1]) == 2
        finally:
            reader.close()
        for other in others:
            group.restart(other)
        group.wait_sync_state_set(3)


def test_gregor_group_list_and_describe_work_against_a_cluster(calm_group):
    """The operator's commands: groups are listed on every node (followers list none) and
    described at their coordinator, the master."""
    group = calm_group
    create_topic(group, "listed", partitions=1)
    make_client("kafka-python", group.bootstrap).produce("listed", [Message(b"x", partition=0)])
    from kafka import KafkaConsumer
    consumer = KafkaConsumer("listed", bootstrap_servers=group.bootstrap, group_id="listed-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    assert sum(1 for _ in consumer) == 1
    consumer.commit()
    consumer.close()

    def gregor(*args: str) -> list:
        done = subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", group.bootstrap,
                               "--output", "json"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert "listed-group" in [g["group"] for g in gregor("group", "list")]  # the shared group's others too
    described = gregor("group", "describe", "listed-group")
    assert json.dumps(described).count('"listed"') >= 1


def test_metrics_show_the_role_the_set_and_each_followers_lag(calm_group):
    group = calm_group  # its nodes serve the admin API
    master = group.master()
    import re
    import urllib.request

    def metrics(node: int) -> str:
        address = re.search(r"gregor admin API on (http://[\d.:]+)", group.nodes[node].log()).group(1)
        with urllib.request.urlopen(f"{address}/metrics", timeout=10) as answer:
            return answer.read().decode()

    text = metrics(master)
    assert "gregor_replication_master 1.0" in text
    assert "gregor_replication_sync_state_set_size 3.0" in text
    assert len(re.findall(r'gregor_replication_follower_lag_bytes\{node="\d"\} ', text)) == 2
    follower = next(n for n in group.nodes if n != master)
    assert "gregor_replication_master 0.0" in metrics(follower)


def test_a_follower_answers_an_idempotent_producers_init_producer_id(calm_group):
    """Producers ask any node for an id (Kafka's brokers all answer): ids come in blocks from
    ZooKeeper, so a follower answers without writing its commitlog, and ids never repeat."""
    from kafka.protocol.producer import InitProducerIdRequest

    from tests.kit.wire import WireClient
    group = calm_group
    master = group.master()
    ids = set()
    for node in group.nodes:
        wire = WireClient(group.address(node))
        for _ in range(3):
            answer = wire.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                           producer_id=-1, producer_epoch=-1))
            assert answer.error_code == 0, (node, answer)
            ids.add(answer.producer_id)
        wire.close()
    assert len(ids) == 9
    follower = next(n for n in group.nodes if n != master)
    assert "closing" not in group.nodes[follower].log()


def test_a_transaction_is_readable_at_once_where_the_master_is_alone_in_the_sync_state_set(broker_group):
    """A master alone in its sync-state set (here a 1-node group; after a failover in a 2-node
    group, or while its followers are out of the set) moves its high watermark at each append.
    Before, a transaction's markers did not: they stayed above the high watermark, and the
    transaction's records unreadable to read_committed consumers, until the next append."""
    group = broker_group(1)
    create_topic(group, "txn-alone", partitions=2)
    wait_described(group.bootstrap, "txn-alone", 2)
    producer = Producer({"bootstrap.servers": group.bootstrap, "transactional.id": "alone"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("txn-alone", value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    producer.commit_transaction(30)
    tps = [TopicPartition("txn-alone", p) for p in range(2)]
    consumer = KafkaConsumer(bootstrap_servers=group.bootstrap, isolation_level="read_committed")
    try:
        deadline = time.monotonic() + 10
        while (stable := consumer.end_offsets(tps)) != {tp: 3 for tp in tps} and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        consumer.close()
    assert stable == {tp: 3 for tp in tps}  # 2 records and the commit marker in each partition
