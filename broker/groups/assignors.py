"""The server-side assignors of consumer-protocol groups (KIP-848; `group.consumer.assignors`):
`uniform` (Kafka's UniformAssignor: as even as the subscriptions allow, and sticky: a partition
stays with its member when that keeps the balance) and `range` (Kafka's RangeAssignor: each
topic's partitions in contiguous ranges over its subscribers, sorted by member id, so members
subscribed to topics of equal size get the same partition numbers: co-partitioning). Sans-IO:
subscriptions, partition counts and the current assignment in, a target assignment out. Racks are
not considered (Kafka's assignors prefer a replica in the member's rack when racks are known)."""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, dict[str, frozenset[int]]]  # member id -> topic -> partitions


def _shape(members: Mapping[str, set[str]], out: dict[str, dict[str, set[int]]]) -> Assignment:
    return {m: {t: frozenset(ps) for t, ps in sorted(out.get(m, {}).items()) if ps} for m in members}


def range_assignor(members: Mapping[str, set[str]], partitions: Mapping[str, int],
                   current: Mapping[str, Mapping[str, frozenset[int]]] | None = None) -> Assignment:
    """Each topic's partitions split into contiguous ranges over its subscribers in member-id order;
    the first (count % subscribers) members get one more."""
    out: dict[str, dict[str, set[int]]] = {}
    for topic in sorted({t for subscribed in members.values() for t in subscribed}):
        count = partitions.get(topic, 0)
        subscribers = sorted(m for m, subscribed in members.items() if topic in subscribed)
        if not count or not subscribers:
            continue
        each, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            n = each + (1 if i < extra else 0)
            out.setdefault(member, {})[topic] = set(range(start, start + n))
            start += n
    return _shape(members, out)


def uniform_assignor(members: Mapping[str, set[str]], partitions: Mapping[str, int],
                     current: Mapping[str, Mapping[str, frozenset[int]]] | None = None) -> Assignment:
    """Every partition of a subscribed topic to one subscriber, the counts as even as the
    subscriptions allow, moving as few partitions from their current member as that takes."""
    current = current or {}
    load: dict[str, int] = {m: 0 for m in members}
    owner: dict[tuple[str, int], str] = {}
    wanted = [(t, p) for t in sorted({t for s in members.values() for t in s}) for p in range(partitions.get(t, 0))]
    eligible = {tp: sorted(m for m, s in members.items() if tp[0] in s) for tp in wanted}
    # fair share if every member could take every partition: nobody keeps more than the ceiling
    ceiling = -(-len(wanted) // len(members)) if members else 0
    for member in sorted(members):
        for topic, ps in sorted(current.get(member, {}).items()):
            for p in sorted(ps):
                tp = (topic, p)
                if tp in eligible and member in eligible[tp] and tp not in owner and load[member] < ceiling:
                    owner[tp] = member
                    load[member] += 1
    # the rest, the most constrained partitions first, each to its least loaded subscriber
    for tp in sorted((tp for tp in wanted if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)):
        if eligible[tp]:
            member = min(eligible[tp], key=lambda m: (load[m], m))
            owner[tp] = member
            load[member] += 1
    # then even out what heterogeneous subscriptions left uneven: move one partition at a time
    # from a member to a less loaded subscriber of its topic while that narrows the gap (equal
    # subscriptions are even already: nobody kept more than the ceiling, the rest went to the least loaded)
    rounds = len(wanted) if len({frozenset(s) for s in members.values()}) > 1 else 0
    for _ in range(rounds):
        moved = False
        for tp in sorted(owner, key=lambda tp: (-load[owner[tp]], tp)):
            giver = owner[tp]
            taker = min(eligible[tp], key=lambda m: (load[m], m))
            if load[giver] - load[taker] > 1:
                owner[tp] = taker
                load[giver] -= 1
                load[taker] += 1
                moved = True
                break
        if not moved:
            break
    out: dict[str, dict[str, set[int]]] = {}
    for (topic, p), member in owner.items():
        out.setdefault(member, {}).setdefault(topic, set()).add(p)
    return _shape(members, out)


ASSIGNORS = {"uniform": uniform_assignor, "range": range_assignor}  # Kafka's default: uniform
