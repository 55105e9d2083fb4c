"""Eligible leader replicas (KIP-966): the rules, as Kafka's ``PartitionChangeBuilder``
keeps them, carried into the ZooKeeper-mode controller.

With ``min.insync.replicas`` strict (a record is committed only once the ISR holds at
least that many replicas), a replica that leaves an ISR already below the minimum
still has every committed record: nothing was committed since. Such replicas are the
partition's *eligible leader replicas*; when the ISR empties, one of them may lead
without losing a committed record. The rules, with ``min_isr`` the topic's
``min.insync.replicas`` capped at its replication factor (``effective_min_isr``):

- ``tracked`` (every change of a partition's leader or ISR, whoever decides it): an
  ISR at or above ``min_isr`` clears the ELR; below it, the ELR becomes the old ELR
  and old ISR, less the new ISR and less the brokers that came back from an unclean
  shutdown (they may have lost records). An unclean election clears the ELR. When a
  change empties the ISR, ``last_known_elr`` remembers the leader it had (Kafka 4's
  "last known leader", its balanced recovery); a change that leaves the partition led
  clears it.
- ``elect`` (a broker change, the controller's decision while the feature is on): the
  dead brokers and those back from an unclean shutdown leave the ISR, the leader too,
  so the ISR may empty; a leader is chosen in this order: the current leader if still
  valid, the first replica (assignment order) that is live and in the ISR, or, with the
  ISR empty, live and in the ELR (it leads with an ISR of itself and leaves the ELR);
  the last known leader if live, with ISR and ELR empty; with unclean leader election
  on, any live replica, eligible or not; else none (leader -1). A new leader raises
  the leader epoch.
- ``cleared`` (the feature turned off, or the topic's ``min.insync.replicas``
  changed, as Kafka's ``ClearElrRecord``): no ELR and no last known ELR. A leaderless
  partition whose ISR had emptied gets its ELR and last known leader back as its ISR,
  the ZooKeeper-mode rule (an offline partition keeps its last in-sync replicas, who
  may lead again when they return), so clearing never leaves it needing an unclean
  election.

Kafka keeps ELRs in a set (order unspecified); here they are sorted.

Concurrency: pure functions; call them from anywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Final

from tickwheel.replica import NO_LEADER, LeaderAndIsr

ELR_FEATURE: Final = "eligible.leader.replicas.version"
"""The finalized feature that turns the rules on (level 1)."""


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    """``min.insync.replicas`` as the ELR rules apply it: at most the replication factor."""
    return min(min_insync_replicas, replication_factor)


def _sorted(brokers: Collection[int]) -> tuple[int, ...]:
    return tuple(sorted(set(brokers)))


def _target_elr(
    old: LeaderAndIsr, isr: Collection[int], min_isr: int, unclean_shutdown: Collection[int]
) -> tuple[int, ...]:
    if len(isr) >= min_isr:
        return ()
    candidates = (set(old.elr) | set(old.isr)) - set(isr) - set(unclean_shutdown)
    return _sorted(candidates)


def tracked(
    old: LeaderAndIsr,
    new: LeaderAndIsr,
    *,
    min_isr: int,
    unclean_shutdown: Collection[int] = (),
) -> LeaderAndIsr:
    """``new`` (its leader and ISR decided from ``old``) with the ELR and last known
    ELR that change gives them."""
    elr = _target_elr(old, new.isr, min_isr, unclean_shutdown)
    unclean_election = (
        new.leader not in (old.leader, NO_LEADER)
        and new.leader not in old.isr
        and new.leader not in old.elr
    )
    if unclean_election:
        elr = ()
    last_known = old.last_known_elr
    isr_emptied = not new.isr and bool(old.isr)
    if isr_emptied and old.leader != NO_LEADER:
        last_known = (old.leader,)
    elif new.leader != NO_LEADER:
        last_known = ()
    return replace(new, elr=elr, last_known_elr=last_known)


def elect(
    replicas: Sequence[int],
    state: LeaderAndIsr,
    live: Collection[int],
    *,
    min_isr: int,
    unclean: bool,
    controller_epoch: int,
    unclean_shutdown: Collection[int] = (),
) -> LeaderAndIsr | None:
    """``state`` after the live brokers became ``live`` (those of ``unclean_shutdown``
    back from an unclean shutdown); None if nothing changes."""
    acceptable = set(live) - set(unclean_shutdown)
    isr = tuple(b for b in state.isr if b in acceptable)
    elr = _target_elr(state, isr, min_isr, unclean_shutdown)

    def valid(broker: int) -> bool:
        return broker in acceptable and (broker in isr or (not isr and broker in elr))

    leader = next((b for b in (state.leader, *replicas) if valid(b)), NO_LEADER)
    last_known = state.last_known_elr
    if leader == NO_LEADER:
        if not isr and not elr and len(last_known) == 1 and last_known[0] in acceptable:
            leader = last_known[0]
        elif unclean:
            leader = next((b for b in replicas if b in acceptable), NO_LEADER)
    if leader not in (state.leader, NO_LEADER) and leader not in isr:
        isr = (leader,)
    epoch = state.leader_epoch if leader == state.leader else state.leader_epoch + 1
    decided = replace(
        state,
        leader=leader,
        leader_epoch=epoch,
        isr=_sorted(isr),
        controller_epoch=controller_epoch,
    )
    new = tracked(state, decided, min_isr=min_isr, unclean_shutdown=unclean_shutdown)
    same = (new.leader, new.isr, new.elr, new.last_known_elr) == (
        state.leader,
        state.isr,
        state.elr,
        state.last_known_elr,
    )
    return None if same else new


def cleared(state: LeaderAndIsr, *, controller_epoch: int) -> LeaderAndIsr | None:
    """``state`` without ELR and last known ELR; None if it has neither."""
    if not state.elr and not state.last_known_elr:
        return None
    isr = state.isr
    if not isr and state.leader == NO_LEADER:
        isr = _sorted((*state.elr, *state.last_known_elr))
    return replace(state, isr=isr, elr=(), last_known_elr=(), controller_epoch=controller_epoch)
