"""`gregor topic ...` and `gregor cluster info`: topic and cluster administration over the Kafka
protocol (CreateTopics, Metadata, ListOffsets, DescribeConfigs, IncrementalAlterConfigs,
CreatePartitions, DeleteTopics, DescribeCluster), so they work against Apache Kafka too.

Each command takes the parsed arguments and the stream to print on, prints a table or JSON,
and raises CliError for what it cannot do; it never prints errors itself.
"""

from __future__ import annotations

import argparse
import re
import socket
import time
from typing import Any, TextIO

from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, OffsetSpec
import kafka.errors as Errors
from kafka.errors import UnknownTopicOrPartitionError

from broker.cli.connect import CliError, admin_client, kafka_errors, response_error, topic_partitions
from broker.cli.format import as_json, fields, node_list, table

WAIT_FOR_TOPIC_MS = 10_000


def create(args: argparse.Namespace, out: TextIO) -> int:
    configs = dict(args.config)
    with admin_client(args.bootstrap, args.command_config) as admin:
        _create(admin, args.name, {"num_partitions": args.partitions, "replication_factor": args.replicas,
                                   "configs": configs})
    out.write(f"created topic {args.name}\n")
    return 0


def create_view(args: argparse.Namespace, out: TextIO) -> int:
    """A view is a topic created with `view.source` and `view.tags` configs; -1 partitions takes the
    source's count (docs/extensions.md)."""
    with admin_client(args.bootstrap, args.command_config) as admin:
        _create(admin, args.name, {"num_partitions": -1, "replication_factor": -1,
                                   "configs": {"view.source": args.source, "view.tags": args.tags}},
                what="view")
    out.write(f"created view {args.name} of {args.source} for tags {args.tags}\n")
    return 0


def _create(admin: KafkaAdminClient, name: str, spec: dict[str, Any], what: str = "topic") -> None:
    with kafka_errors(f"create {what} {name}"):
        result = admin.create_topics({name: spec}, raise_errors=False)
    (topic,) = result["topics"]
    error = response_error(topic["error_code"], topic.get("error_message"))
    if error:
        raise CliError(f"cannot create {what} {name}: {error}")
    # CreateTopics answers before every broker's metadata has the topic (KRaft); wait, so that a
    # produce or describe run next finds it
    with kafka_errors(f"see {what} {name} in the cluster's metadata"):
        admin.wait_for_topics([name], timeout_ms=WAIT_FOR_TOPIC_MS)


def list_topics(args: argparse.Namespace, out: TextIO) -> int:
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors("list topics"):
        found = admin.describe_topics()
    rows = sorted((t["name"], len(t["partitions"]), _replication(t), t["is_internal"]) for t in found
                  if args.internal or not t["is_internal"])
    if args.output == "json":
        out.write(as_json([{"name": n, "partitions": p, "replicas": r, "internal": i} for n, p, r, i in rows]))
    else:
        out.write(table(("NAME", "PARTITIONS", "REPLICAS"), [row[:3] for row in rows]))
    return 0


def _replication(topic: dict) -> int | None:
    return max((len(p["replica_nodes"]) for p in topic["partitions"]), default=None)


def describe(args: argparse.Namespace, out: TextIO) -> int:
    """Partitions (leader, replicas, ISR, offsets), configs and the cluster's brokers. During a
    failover it still answers: a partition without a leader shows none (-1) and no offsets, a
    broker Metadata lists that does not answer is marked so, and configs come from any node."""
    with admin_client(args.bootstrap, args.command_config) as admin:
        with kafka_errors(f"describe topic {args.name}"):
            (topic,) = _retrying(lambda: admin.describe_topics([args.name]))
            listed = _retrying(admin.describe_cluster)
        if topic.get("error_code"):  # an unknown topic ends here, with its name
            raise CliError(f"unknown topic {args.name}" if topic["error_code"] == UnknownTopicOrPartitionError.errno
                           else f"cannot describe topic {args.name}: {response_error(topic['error_code'])}")
        brokers = sorted(({"id": b["broker_id"], "host": b["host"], "port": b["port"],
                           "answers": _answers(b["host"], b["port"])} for b in listed["brokers"]), key=lambda b: b["id"])
        answering = {b["id"] for b in brokers if b["answers"]}
        partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
        tps = [TopicPartition(args.name, p["partition_index"]) for p in partitions]
        led = [tp for p, tp in zip(partitions, tps) if p["leader_id"] in answering]
        start, end = _offsets(admin, led, OffsetSpec.EARLIEST), _offsets(admin, led, OffsetSpec.LATEST)
        try:
            found = _retrying(lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, args.name)],
                                                             config_filter="all"))["topic"][args.name]
        except Errors.KafkaError:
            found = {}
    described = {
        "name": args.name,
        "internal": topic["is_internal"],
        "partitions": [{"partition": p["partition_index"], "leader": p["leader_id"], "replicas": p["replica_nodes"],
                        "isr": p["isr_nodes"], "log_start_offset": start.get(tp), "log_end_offset": end.get(tp)}
                       for p, tp in zip(partitions, tps)],
        "configs": [{"name": name, "value": c["value"], "source": c["config_source"], "read_only": c["read_only"],
                     "sensitive": c["is_sensitive"]}
                    for name, c in sorted(found.items())],
        "brokers": brokers,
        "alive": sorted(answering),
    }
    out.write(as_json(described) if args.output == "json" else describe_text(described))
    return 0


def _retrying(call, attempts: int = 5):
    """A call kafka-python sent to a node that does not answer (a master just killed, still
    listed), or that answered a retriable error: again, to the node it picks next."""
    for attempt in range(attempts):
        try:
            return call()
        except Errors.KafkaError as exc:
            if not exc.retriable or attempt == attempts - 1:
                raise
            time.sleep(0.2)


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def _offsets(admin: KafkaAdminClient, tps: list[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
    """The partitions' offsets, from their leaders; none for a partition whose leader does not answer."""
    if not tps:
        return {}
    try:
        found = _retrying(lambda: admin.list_partition_offsets({tp: spec for tp in tps}))
    except Errors.KafkaError:
        return {}
    return {tp: info.offset for tp, info in found.items()}


def describe_text(topic: dict) -> str:
    head = fields([("NAME", topic["name"]), ("PARTITIONS", len(topic["partitions"])),
                   ("REPLICAS", max((len(p["replicas"]) for p in topic["partitions"]), default=None))])
    partitions = table(("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "LOG-END-OFFSET"),
                       [(p["partition"], p["leader"] if p["leader"] >= 0 else "none", node_list(p["replicas"]),
                         node_list(p["isr"]), p["log_start_offset"], p["log_end_offset"]) for p in topic["partitions"]])
    down = [b["id"] for b in topic["brokers"] if not b["answers"]]
    configs = table(("CONFIG", "VALUE", "SOURCE"),
                    [(c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"])
                     for c in topic["configs"]])
    # broker ids, not counts: a single node's "0" must not read as "no broker answers"
    brokers = fields([("ANSWERING BROKER IDS", node_list(topic["alive"]) or "none")]
                     + ([("LISTED, NOT ANSWERING", node_list(down))] if down else []))
    return f"{head}\n{partitions}\n{brokers}\n{configs}"


def alter(args: argparse.Namespace, out: TextIO) -> int:
    """IncrementalAlterConfigs: only the named configs change (AlterConfigs would reset the rest)."""
    if not args.config and not args.delete_config:
        raise CliError("give --config KEY=VALUE or --delete-config KEY", status=2)
    changes: dict[str, tuple[AlterConfigOp, str | None]] = {k: (AlterConfigOp.SET, v) for k, v in args.config}
    changes.update({k: (AlterConfigOp.DELETE, None) for k in args.delete_config})
    with admin_client(args.bootstrap, args.command_config) as admin:
        topic_partitions(admin, args.name)
        with kafka_errors(f"alter topic {args.name}"):
            result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, args.name, changes)],
                                         incremental=True, raise_on_unknown=False)
    outcome = result["topic"][args.name]
    if outcome != "OK":  # kafka-python gives the error as "[Error 40] InvalidConfigurationError: message"
        coded = re.fullmatch(r"\[Error (\d+)\] \w+: (.*)", outcome, re.DOTALL)
        raise CliError(f"cannot alter topic {args.name}: "
                       f"{response_error(int(coded.group(1)), coded.group(2)) if coded else outcome}")
    done = [f"{k}={v}" for k, v in args.config] + [f"{k} deleted" for k in args.delete_config]
    out.write(f"altered topic {args.name}: {', '.join(done)}\n")
    return 0


def add_partitions(args: argparse.Namespace, out: TextIO) -> int:
    with admin_client(args.bootstrap, args.command_config) as admin:
        topic_partitions(admin, args.name)
        with kafka_errors(f"add partitions to {args.name}"):
            result = admin.create_partitions({args.name: args.to}, raise_errors=False)
    (outcome,) = result.results
    error = response_error(outcome.error_code, outcome.error_message)
    if error:
        raise CliError(f"cannot add partitions to {args.name}: {error}")
    out.write(f"topic {args.name} now has {args.to} partitions\n")
    return 0


def delete(args: argparse.Namespace, out: TextIO) -> int:
    """Deletes each named topic; reports every failure and exits 1 if any."""
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors(f"delete {', '.join(args.names)}"):
        result = admin.delete_topics(args.names, raise_errors=False)
    failed = []
    for topic in result["topics"]:
        error = response_error(topic["error_code"], topic.get("error_message"))
        if topic["error_code"] == UnknownTopicOrPartitionError.errno:
            error = "unknown topic"
        if error:
            failed.append(f"{topic['name']}: {error}")
        else:
            out.write(f"deleted topic {topic['name']}\n")
    if failed:
        raise CliError(f"cannot delete {'; '.join(failed)}")
    return 0


def cluster_info(args: argparse.Namespace, out: TextIO) -> int:
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors("describe the cluster"):
        found = admin.describe_cluster()
    info = {"cluster_id": found["cluster_id"], "controller_id": found["controller_id"],
            "brokers": sorted(({"id": b["broker_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                               for b in found["brokers"]), key=lambda b: b["id"])}
    if args.output == "json":
        out.write(as_json(info))
        return 0
    out.write(fields([("CLUSTER-ID", info["cluster_id"]), ("CONTROLLER", info["controller_id"])]) + "\n")
    out.write(table(("BROKER", "HOST", "PORT", "RACK"),
                    [(b["id"], b["host"], b["port"], b["rack"]) for b in info["brokers"]]))
    return 0
