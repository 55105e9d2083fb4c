"""``LeaderAndIsr``: a partition's leadership as the cluster records it.

Kafka's ``LeaderAndIsr``: the leader's broker id, the leader epoch (raised on every
change of leader, so fetches and produces aimed at an older leader are fenced), the
in-sync replicas, the epoch of the controller that last elected the leader, and the
version of the record that holds it in the coordination service. KIP-966 adds the
eligible leader replicas (``elr``: replicas that left the ISR while it was below
``min.insync.replicas``, so they hold every committed record) and the last known
leader (``last_known_elr``) of a partition whose ISR emptied; both are empty while the
feature is off. Every change is
written conditionally on that version, so two writers can never both win: the loser
re-reads and decides again.

Immutable; safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

NO_LEADER = -1
"""The leader id of a partition with no live leader."""
INITIAL_LEADER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0
UNKNOWN_VERSION = -1
"""The version of a state not read from (or written to) the coordination service."""


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch, ISR, controller epoch and record version."""

    leader: int
    leader_epoch: int = INITIAL_LEADER_EPOCH
    isr: tuple[int, ...] = ()
    controller_epoch: int = INITIAL_CONTROLLER_EPOCH
    version: int = UNKNOWN_VERSION
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def with_isr(self, isr: tuple[int, ...]) -> LeaderAndIsr:
        """The same leadership with ``isr`` instead (sorted; the version is kept)."""
        return replace(self, isr=tuple(sorted(isr)))
