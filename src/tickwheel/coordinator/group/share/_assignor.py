"""Kafka's ``simple`` share-group assignor: every partition to at least one member.

Share groups have no exclusive ownership, so the assignor only has to spread the load:
for each topic, the members subscribed to it (in member-id order) and its partitions
are paired round-robin from whichever side is larger --

- at least as many partitions as members: partition ``p`` goes to member ``p mod M``,
  so each member gets ``P/M`` partitions, rounded up or down;
- fewer partitions than members: member ``m`` gets partition ``m mod P``, so every
  member has one partition and each partition is shared by ``M/P`` members, rounded.

The result depends only on the member ids, their subscriptions and the partition counts,
so every heartbeat of a stable group sees the same assignment.

Pure function; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, dict[str, list[int]]]
"""member id -> topic name -> partitions."""


def assign(
    subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int]
) -> Assignment:
    """The members' partitions, given each member's subscribed topics and the partition
    count of each existing topic (a subscribed topic that does not exist is skipped)."""
    assignment: Assignment = {member: {} for member in subscriptions}
    topics = sorted({topic for topics in subscriptions.values() for topic in topics})
    for topic in topics:
        count = partitions.get(topic, 0)
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        if count <= 0 or not members:
            continue
        if count >= len(members):
            for partition in range(count):
                member = members[partition % len(members)]
                assignment[member].setdefault(topic, []).append(partition)
        else:
            for index, member in enumerate(members):
                assignment[member][topic] = [index % count]
    return assignment
