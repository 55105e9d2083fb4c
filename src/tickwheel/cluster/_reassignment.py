"""``ReplicaAssignment``: a partition's replicas, and the reassignment moving them.

Kafka's ``ReplicaAssignment`` (ZooKeeper mode). While a partition is reassigned from
its original replicas (ORS) to a target (TRS), its assignment holds both:

==================  ===============================================================
``replicas`` (RS)   ``TRS + ORS``, target first, each broker once
``adding`` (AR)     ``TRS - ORS``: the replicas being brought in
``removing`` (RR)   ``ORS - TRS``: the replicas dropped once the target is in sync
==================  ===============================================================

so ``origin`` (ORS) is ``RS - AR`` and ``target`` (TRS) is ``RS - RR``; all three are
stored in the topic's znode, and a controller that takes over reads the reassignment
in progress from there. ``reassign_to`` starts a reassignment (or replaces the one in
progress: the original replicas stay those of before the first); cancelling is a
reassignment back to ``origin``, after which nothing is added or removed. A target
ordered differently from the current replicas cannot restore their order when
cancelled (as Kafka warns).

``invalid_target`` is Kafka's check of a requested target (``validateReplicas``).

Pure values and functions; safe anywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas, with those a reassignment adds and removes."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        """Whether a reassignment is in progress."""
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        """The replicas before the reassignment (ORS)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas after the reassignment (TRS)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from ``origin`` to ``target``."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


def invalid_target(
    current: ReplicaAssignment, target: Sequence[int], live: Collection[int]
) -> str | None:
    """Why ``target`` is not a valid reassignment of ``current`` (Kafka's
    INVALID_REPLICA_ASSIGNMENT messages), or None if it is."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {list(target)}"
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return (
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(live)}"
        )
    return None
