"""`gregor group ...` (and the deprecated `gregor replay`): consumer groups over the Kafka protocol
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups), as Kafka's
kafka-consumer-groups does it, so they work against Apache Kafka too.

A reset commits offsets for a group with no members only: a running consumer would overwrite
them with its next commit, so an active group is refused, as Kafka's tool refuses it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

import kafka.errors as Errors
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.structs import OffsetAndMetadata

from broker.cli.connect import CliError, admin_client, error_text, kafka_errors, topic_partitions
from protocol.kip848 import ConsumerGroupDescribeRequest
from protocol.kip932 import AlterShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest
from broker.cli.format import (
    OffsetMove,
    as_json,
    fields,
    lag,
    parse_duration_ms,
    parse_time_ms,
    parse_topic_partitions,
    reset_plan,
    table,
)

INACTIVE_STATES = ("Empty", "Dead")


def list_groups(args: argparse.Namespace, out: TextIO) -> int:
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors("list groups"):
        found = admin.list_groups()
    rows = sorted((g["group_id"], g.get("group_state"), g["protocol_type"]) for g in found)
    if args.output == "json":
        out.write(as_json([{"group": g, "state": s, "protocol_type": p} for g, s, p in rows]))
    else:
        out.write(table(("GROUP", "STATE", "PROTOCOL-TYPE"), rows))
    return 0


def describe(args: argparse.Namespace, out: TextIO) -> int:
    group = args.group
    with admin_client(args.bootstrap, args.command_config) as admin:
        shared = _share_group(admin, group)
        if shared is not None:  # KIP-932: members read partitions together, the start offset is the group's
            out.write(as_json(shared) if args.output == "json" else _share_text(shared))
            return 0
        # KIP-848 first: Kafka 4 answers DescribeGroups for such a group with "not a classic group"
        modern = _consumer_protocol(admin, group)
        with kafka_errors(f"describe group {group}"):
            if modern is not None:  # the broker holds the members' assignments and epochs
                found = {"group_state": modern["state"], "protocol_type": "consumer", "protocol_data": None}
            else:
                try:
                    found = admin.describe_groups([group])[group]
                except ValueError as exc:  # kafka-python decodes every member as the consumer protocol
                    raise CliError(f"cannot describe group {group}: its members do not use the consumer "
                                   "protocol (a Kafka Connect or other non-consumer group); Kafka's "
                                   "kafka-consumer-groups refuses such a group too") from exc
            committed = admin.list_group_offsets({group: None}).get(group, {})
        if modern is None and found.get("error"):
            raise CliError(f"cannot describe group {group}: {found['error']}")
        if modern is None and found["group_state"] == "Dead" and not committed:
            raise CliError(f"unknown group {group}")
        members = modern["members"] if modern is not None else [_member(m) for m in found["members"]]
        owners = {(a["topic"], a["partition"]): m["member_id"] for m in members for a in m["assignment"]}
        tps = sorted({(tp.topic, tp.partition) for tp in committed} | set(owners))
        log_end = _log_end_offsets(admin, tps)
    current = {(tp.topic, tp.partition): meta.offset for tp, meta in committed.items() if meta.offset >= 0}
    described = {
        "group": group, "state": found["group_state"], "protocol_type": found["protocol_type"],
        "protocol": found["protocol_data"] or None, "members": members,
        **({k: modern[k] for k in ("type", "group_epoch", "assignment_epoch", "assignor")} if modern else {}),
        "offsets": [{"topic": t, "partition": p, "current_offset": current.get((t, p)),
                     "log_end_offset": log_end.get((t, p)), "lag": lag(current.get((t, p)), log_end.get((t, p))),
                     "member_id": owners.get((t, p))} for t, p in tps],
    }
    out.write(as_json(described) if args.output == "json" else _describe_text(described))
    return 0


def _consumer_protocol(admin: KafkaAdminClient, group: str) -> dict | None:
    """A KIP-848 group as ConsumerGroupDescribe shows it: epochs, assignor, each member's epoch,
    assignment and target. None when the broker does not serve the API (Kafka 3.9 by default) or
    the group is a classic one."""
    answer = _coordinator_call(admin, group, ConsumerGroupDescribeRequest(group_ids=[group],
                                                                          include_authorized_operations=False))
    if answer is None:
        return None
    described = answer.groups[0]
    if described.error_code:
        return None

    def partitions(assignment) -> list[dict]:
        return [{"topic": tp.topic_name, "partition": p} for tp in assignment.topic_partitions
                for p in sorted(tp.partitions)]

    return {"type": "consumer", "state": described.group_state, "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch, "assignor": described.assignor_name,
            "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                         "host": m.client_host, "member_epoch": m.member_epoch,
                         "assignment": partitions(m.assignment), "target_assignment": partitions(m.target_assignment)}
                        for m in described.members]}


def _coordinator_call(admin: KafkaAdminClient, group: str, request):
    """Send `request` to the group's coordinator (kafka-python 3.0 has no call for the Kafka 4 group
    APIs: its admin client's request manager sends them); None if the broker does not serve it."""
    try:
        admin._manager.broker_version_data.api_version(type(request))
    except Errors.IncompatibleBrokerVersion:
        return None

    async def ask():
        node = await admin._find_coordinator_id(group)
        return await admin._manager.send(request, node_id=node)

    with kafka_errors(f"describe group {group}"):
        return admin._manager.run(ask)


def _share_group(admin: KafkaAdminClient, group: str) -> dict | None:
    """A share group (KIP-932) as ShareGroupDescribe and DescribeShareGroupOffsets show it; None
    when the broker serves no share groups or the group is not one."""
    answer = _coordinator_call(admin, group, ShareGroupDescribeRequest(group_ids=[group],
                                                                       include_authorized_operations=False))
    if answer is None or answer.groups[0].error_code:
        return None
    described = answer.groups[0]
    Describe = DescribeShareGroupOffsetsRequest
    offsets = _coordinator_call(admin, group, Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None)]))
    rows = [] if offsets is None else [
        {"topic": t.topic_name, "partition": p.partition_index, "start_offset": p.start_offset,
         "lag": p.lag if p.lag >= 0 else None} for t in offsets.groups[0].topics for p in t.partitions]
    return {"group": group, "type": "share", "state": described.group_state, "group_epoch": described.group_epoch,
            "assignor": described.assignor_name,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                         "member_epoch": m.member_epoch,
                         "assignment": [{"topic": tp.topic_name, "partition": p} for tp in m.assignment.topic_partitions
                                        for p in sorted(tp.partitions)]} for m in described.members],
            "offsets": sorted(rows, key=lambda r: (r["topic"], r["partition"]))}


def _share_text(group: dict) -> str:
    head = fields([("GROUP", group["group"]), ("TYPE", "share (KIP-932)"), ("STATE", group["state"]),
                   ("GROUP-EPOCH", group["group_epoch"]), ("ASSIGNOR", group["assignor"]),
                   ("MEMBERS", len(group["members"]))])
    members = table(("MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "ASSIGNMENT"),
                    [(m["member_id"], m["client_id"], m["host"], m["member_epoch"],
                      ",".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]) or None)
                     for m in group["members"]])
    offsets = table(("TOPIC", "PARTITION", "START-OFFSET", "LAG"),
                    [(o["topic"], o["partition"], o["start_offset"], o["lag"]) for o in group["offsets"]])
    return f"{head}\n{members + chr(10) if group['members'] else ''}{offsets}"


def _member(found: dict) -> dict:
    assignment = found.get("member_assignment")
    assigned = assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []
    return {"member_id": found["member_id"], "group_instance_id": found.get("group_instance_id"),
            "client_id": found["client_id"], "host": found["client_host"],
            "assignment": [{"topic": a["topic"], "partition": p} for a in assigned for p in sorted(a["partitions"])]}


def _log_end_offsets(admin: KafkaAdminClient, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Log end offsets of the partitions that still exist (a group may keep offsets of a deleted
    topic; ListOffsets would fail for all if one were asked for)."""
    topics = sorted({t for t, _ in tps})
    if not topics:
        return {}
    known = {(t["name"], p["partition_index"]) for t in admin.describe_topics(topics) if not t["error_code"]
             for p in t["partitions"]}
    asked = [TopicPartition(t, p) for t, p in tps if (t, p) in known]
    if not asked:
        return {}
    found = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in asked})
    return {(tp.topic, tp.partition): found[tp].offset for tp in asked}


def _describe_text(group: dict) -> str:
    def listed(assignment: list[dict]) -> str | None:
        return ",".join(f"{a['topic']}-{a['partition']}" for a in assignment) or None

    if group.get("type") == "consumer":  # KIP-848: epochs and the targets members reconcile towards
        head = fields([("GROUP", group["group"]), ("TYPE", "consumer (KIP-848)"), ("STATE", group["state"]),
                       ("GROUP-EPOCH", group["group_epoch"]), ("ASSIGNMENT-EPOCH", group["assignment_epoch"]),
                       ("ASSIGNOR", group["assignor"]), ("MEMBERS", len(group["members"]))])
        members = table(("MEMBER-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "ASSIGNMENT", "TARGET-ASSIGNMENT"),
                        [(m["member_id"], m["client_id"], m["host"], m["member_epoch"], listed(m["assignment"]),
                          listed(m["target_assignment"])) for m in group["members"]])
    else:
        head = fields([("GROUP", group["group"]), ("STATE", group["state"]), ("PROTOCOL", group["protocol"]),
                       ("MEMBERS", len(group["members"]))])
        members = table(("MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"),
                        [(m["member_id"], m["client_id"], m["host"], listed(m["assignment"]))
                         for m in group["members"]])
    offsets = table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"),
                    [(o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["member_id"])
                     for o in group["offsets"]])
    return f"{head}\n{members + chr(10) if group['members'] else ''}{offsets}"  # a blank line between the tables


def reset_offsets(args: argparse.Namespace, out: TextIO) -> int:
    topic, partitions = parse_topic_partitions(args.topic)
    moves, failed = _reset(args.bootstrap, args.group, topic, partitions, _target(args), dry_run=args.dry_run,
                           config_file=args.command_config)
    rows = [{"topic": m.topic, "partition": m.partition, "old_offset": m.old_offset, "new_offset": m.new_offset,
             "error": failed.get((m.topic, m.partition))} for m in moves]
    if args.output == "json":
        out.write(as_json(rows))
    else:
        out.write(table(("TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET") + (("ERROR",) if failed else ()),
                        [(r["topic"], r["partition"], r["old_offset"], r["new_offset"])
                         + ((r["error"],) if failed else ()) for r in rows]))
    if failed:
        raise CliError(f"cannot commit {len(failed)} of {len(moves)} offsets of group {args.group}")
    print(f"gregor: dry run: nothing committed (without --dry-run, group {args.group} moves to these offsets)"
          if args.dry_run else f"gregor: committed {len(moves)} offsets of group {args.group}", file=sys.stderr)
    return 0


def _target(args: argparse.Namespace) -> OffsetSpec | int | tuple[str, int]:
    """What the partitions move to: an OffsetSpec, an offset, or ("time", epoch ms)."""
    if args.to_earliest:
        return OffsetSpec.EARLIEST
    if args.to_latest:
        return OffsetSpec.LATEST
    if args.to_offset is not None:
        return args.to_offset
    if args.to_datetime is not None:
        return ("time", parse_time_ms(args.to_datetime))
    return ("time", int(time.time() * 1000) - parse_duration_ms(args.by_duration))


def _reset(bootstrap: str, group: str, topic: str, partitions: list[int] | None,
           target: OffsetSpec | int | tuple[str, int], *, dry_run: bool = False, config_file: str | None = None,
           ) -> tuple[list[OffsetMove], dict[tuple[str, int], str]]:
    """Plan a reset of `group` on `topic` and, unless `dry_run`, commit it; returns the moves and
    the partitions whose commit failed, with the reason."""
    with admin_client(bootstrap, config_file) as admin:
        shared = _share_group(admin, group)  # a share group: its start offsets move (AlterShareGroupOffsets)
        if shared is None:
            _refuse_active(admin, group)
        elif shared["members"]:
            raise CliError(f"group {group} has {len(shared['members'])} active member(s) (state {shared['state']}); "
                           "stop its consumers first")
        known = topic_partitions(admin, topic)
        missing = sorted(set(partitions or ()) - set(known))
        if missing:
            raise CliError(f"topic {topic} has no partition {', '.join(map(str, missing))}")
        tps = [TopicPartition(topic, p) for p in (partitions or known)]
        with kafka_errors(f"reset the offsets of group {group} on {topic}"):
            current = None if shared is None else {(o["topic"], o["partition"]): o["start_offset"]
                                                   for o in shared["offsets"] if o["start_offset"] >= 0}
            moves = _plan(admin, group, tps, target, current)
            if dry_run:
                return moves, {}
            if shared is not None:
                return moves, _alter_share_offsets(admin, group, moves)
            outcome = admin.alter_group_offsets(group, {TopicPartition(m.topic, m.partition):
                                                        OffsetAndMetadata(m.new_offset, "", None) for m in moves})
    failed = {(tp.topic, tp.partition): error_text(error) for tp, error in outcome.items()
              if error is not Errors.NoError}
    return moves, failed


def _refuse_active(admin: KafkaAdminClient, group: str) -> None:
    with kafka_errors(f"describe group {group}"):
        found = admin.describe_groups([group])[group]
    if found.get("error"):
        raise CliError(f"cannot describe group {group}: {found['error']}")
    members = found.get("members") or []
    if members or found.get("group_state") not in INACTIVE_STATES:
        raise CliError(f"group {group} has {len(members)} active member(s) (state {found.get('group_state')}); "
                       "stop its consumers first")


def _alter_share_offsets(admin: KafkaAdminClient, group: str, moves: list[OffsetMove]) -> dict[tuple[str, int], str]:
    """AlterShareGroupOffsets: the partitions whose move the broker refused, with the reason."""
    Alter = AlterShareGroupOffsetsRequest
    Topic = Alter.AlterShareGroupOffsetsRequestTopic
    by_topic: dict[str, list] = {}
    for m in moves:
        by_topic.setdefault(m.topic, []).append(Topic.AlterShareGroupOffsetsRequestPartition(
            partition_index=m.partition, start_offset=m.new_offset))
    answer = _coordinator_call(admin, group, Alter(group_id=group, topics=[
        Topic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))
    if answer is None:
        raise CliError("the broker does not serve AlterShareGroupOffsets")
    if answer.error_code:
        raise CliError(f"cannot reset the offsets of group {group}: {error_text(Errors.for_code(answer.error_code))}")
    return {(t.topic_name, p.partition_index): error_text(Errors.for_code(p.error_code))
            for t in answer.responses for p in t.partitions if p.error_code}


def _plan(admin: KafkaAdminClient, group: str, tps: list[TopicPartition],
          target: OffsetSpec | int | tuple[str, int], current: dict | None = None) -> list[OffsetMove]:
    earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
    latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    if isinstance(target, tuple):  # ListOffsets by time: the first offset at or after it, -1 if none
        # (a time before 1970 asks for the first record: negative timestamps are ListOffsets' sentinels)
        found = admin.list_partition_offsets({tp: max(target[1], 0) for tp in tps})
        wanted = {tp: found[tp].offset for tp in tps}
    elif isinstance(target, OffsetSpec):
        wanted = {tp: (earliest if target is OffsetSpec.EARLIEST else latest)[tp].offset for tp in tps}
    else:
        wanted = dict.fromkeys(tps, target)

    def keyed(values: dict) -> dict:
        return {(tp.topic, tp.partition): v for tp, v in values.items()}

    if current is None:  # a consumer group's committed offsets; a share group's start offsets are given
        committed = admin.list_group_offsets({group: tps}).get(group, {})
        current = keyed({tp: m.offset for tp, m in committed.items() if m.offset >= 0})
    return reset_plan(keyed(wanted), keyed({tp: o.offset for tp, o in earliest.items()}),
                      keyed({tp: o.offset for tp, o in latest.items()}), current)


def delete(args: argparse.Namespace, out: TextIO) -> int:
    with admin_client(args.bootstrap, args.command_config) as admin, kafka_errors(f"delete {', '.join(args.groups)}"):
        result = admin.delete_groups(args.groups)
    failed = []
    for group in args.groups:
        outcome = result.get(group, "OK")
        if outcome == "OK":
            out.write(f"deleted group {group}\n")
        elif outcome == Errors.GroupIdNotFoundError.__name__:
            failed.append(f"unknown group {group}")
        else:
            failed.append(f"group {group}: {error_text(getattr(Errors, outcome, Errors.KafkaError))}")
    if failed:
        raise CliError(f"cannot delete {'; '.join(failed)}")
    return 0


def replay(args: argparse.Namespace, out: TextIO) -> int:
    """The deprecated `gregor replay`: a reset to a time, printed as `topic-partition: old -> new`."""
    print(f"gregor: `gregor replay` is deprecated; use `gregor group reset-offsets {args.group} --topic "
          f"{args.topic} --to-datetime {args.to_time}`", file=sys.stderr)
    moves, failed = _reset(args.bootstrap, args.group, args.topic, None, ("time", parse_time_ms(args.to_time)),
                           config_file=args.command_config)
    for m in moves:
        before = "none" if m.old_offset is None else m.old_offset
        after = f"failed: {failed[(m.topic, m.partition)]}" if (m.topic, m.partition) in failed else m.new_offset
        out.write(f"{m.topic}-{m.partition}: {before} -> {after}\n")
    return 1 if failed else 0
