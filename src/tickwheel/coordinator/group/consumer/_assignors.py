"""The server-side assignors of consumer-protocol groups: ``uniform`` and ``range``.

The coordinator computes a group's target assignment itself (KIP-848): the broker's
``group.consumer.assignors`` lists the assignors it offers, the first being the default,
and a member may ask for one by name (``group.remote.assignor`` in librdkafka, sent as
``server_assignor``). Both take every member's subscription (as topic ids) and its
current target, and the partition count of each subscribed topic, and return the new
target of every member. Each partition of a subscribed topic goes to exactly one member
that subscribes to it.

- ``uniform`` (Kafka's UniformAssignor): as even as the subscriptions allow and sticky.
  With identical subscriptions (the common case, Kafka's homogeneous builder) every
  member gets a quota, balanced within one partition; a member keeps what it holds up
  to its quota, so a member that joins takes partitions only from those above the new
  quota and the others keep theirs. With different subscriptions a member keeps the
  partitions of its current target that it still subscribes to; the partitions nobody
  keeps go, in (topic id, partition) order, to the least loaded member subscribed to
  their topic; then, while some member holds two partitions more than another member
  that could take one of them, one moves.
- ``range`` (Kafka's RangeAssignor): for each topic, its subscribers sorted by member id
  get contiguous ranges of partitions, the first ``partitions % members`` one partition
  more; members subscribed to the same topics get the same partition numbers of each
  (co-partitioning), at the price of stickiness.

Pure functions of their arguments; safe from any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tickwheel.coordinator.group.consumer._member import Assignment, normalized

UNIFORM_ASSIGNOR = "uniform"
RANGE_ASSIGNOR = "range"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member: its subscribed topics and current target."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Assignment


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, int]], dict[str, Assignment]]
"""``(members, partitions per topic id) -> target assignment per member``."""

_Partition = tuple[uuid.UUID, int]


def uniform_assign(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """Kafka's ``uniform`` assignor: balanced and sticky (see the module docstring)."""
    subscriptions = {spec.subscribed_topic_ids for spec in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, topics)
    held = {member_id: set(kept) for member_id, kept in _kept(members, topics).items()}
    owned = {tp for partitions in held.values() for tp in partitions}
    subscribers = {
        topic_id: sorted(m for m, spec in members.items() if topic_id in spec.subscribed_topic_ids)
        for topic_id in topics
    }
    for topic_id in sorted(topics):
        eligible = subscribers[topic_id]
        if not eligible:
            continue
        for partition in range(topics[topic_id]):
            tp = (topic_id, partition)
            if tp not in owned:
                taker = min(eligible, key=lambda m: (len(held[m]), m))
                owned.add(tp)
                held[taker].add(tp)
    _balance(held, subscribers)
    return {member_id: _as_assignment(partitions) for member_id, partitions in held.items()}


def _kept(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
) -> dict[str, list[_Partition]]:
    """What each member may keep of its current target: partitions that still exist, of
    topics it still subscribes to, and not kept by a member before it (by id)."""
    held: dict[str, list[_Partition]] = {}
    taken: set[_Partition] = set()
    for member_id in sorted(members):
        spec = members[member_id]
        held[member_id] = []
        for topic_id, partitions in sorted(spec.current.items()):
            if topic_id not in spec.subscribed_topic_ids or topic_id not in topics:
                continue
            for partition in sorted(partitions):
                tp = (topic_id, partition)
                if partition < topics[topic_id] and tp not in taken:
                    taken.add(tp)
                    held[member_id].append(tp)
    return held


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """Identical subscriptions: each member gets its quota, ``partitions // members`` and
    one more for the ``partitions % members`` members that hold the most now (so the
    fewest move); a member over its quota gives up its last partitions, and those and
    the unowned ones fill the members under theirs. O(partitions + members log members).
    """
    (subscribed,) = {spec.subscribed_topic_ids for spec in members.values()}
    every = [(t, p) for t in sorted(subscribed & topics.keys()) for p in range(topics[t])]
    held = _kept(members, topics)
    quota, extra = divmod(len(every), len(members))
    by_load = sorted(members, key=lambda m: (-len(held[m]), m))
    share = {m: quota + (1 if index < extra else 0) for index, m in enumerate(by_load)}
    owned = {tp for partitions in held.values() for tp in partitions}
    pool = [tp for tp in every if tp not in owned]
    for member_id in sorted(members):
        surplus = held[member_id][share[member_id] :]
        del held[member_id][share[member_id] :]
        pool.extend(surplus)
    pool.sort(reverse=True)
    for member_id in sorted(members):
        while len(held[member_id]) < share[member_id]:
            held[member_id].append(pool.pop())
    return {member_id: _as_assignment(set(partitions)) for member_id, partitions in held.items()}


def _balance(held: dict[str, set[_Partition]], subscribers: Mapping[uuid.UUID, list[str]]) -> None:
    """Move partitions from the most loaded members to eligible members with two fewer."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(held, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[giver], reverse=True):
                takers = [m for m in subscribers[tp[0]] if len(held[m]) < len(held[giver]) - 1]
                if takers:
                    taker = min(takers, key=lambda m: (len(held[m]), m))
                    held[giver].remove(tp)
                    held[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def range_assign(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """Kafka's ``range`` assignor: contiguous ranges per topic (see the module docstring)."""
    held: dict[str, set[_Partition]] = {member_id: set() for member_id in members}
    for topic_id, num_partitions in topics.items():
        subscribed = sorted(
            m for m, spec in members.items() if topic_id in spec.subscribed_topic_ids
        )
        if not subscribed:
            continue
        quota, extra = divmod(num_partitions, len(subscribed))
        start = 0
        for index, member_id in enumerate(subscribed):
            length = quota + (1 if index < extra else 0)
            held[member_id].update((topic_id, p) for p in range(start, start + length))
            start += length
    return {member_id: _as_assignment(partitions) for member_id, partitions in held.items()}


def _as_assignment(partitions: set[_Partition]) -> Assignment:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        by_topic.setdefault(topic_id, set()).add(partition)
    return normalized(by_topic)


ASSIGNORS: Mapping[str, Assignor] = {UNIFORM_ASSIGNOR: uniform_assign, RANGE_ASSIGNOR: range_assign}
"""The assignors by the names ``group.consumer.assignors`` and clients use."""
