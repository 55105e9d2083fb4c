"""Leader election rules: what the controller writes when brokers come and go.

Pure functions over a partition's assigned replicas, its ``LeaderAndIsr`` and the live
brokers, as Kafka's ZooKeeper-mode controller decides (``PartitionStateMachine``'s
election strategies and ``ReplicaStateMachine``'s ISR removal):

- ``elect_offline``: a partition whose leader is not live gets the first replica, in
  assignment order, that is live and in the ISR; the leader epoch goes up by one and
  the ISR keeps only live members. With none such, it goes offline (leader -1, a new
  epoch) keeping its ISR, so the last in-sync replica can lead again when it returns
  — unless unclean election is allowed: then the first live replica leads, with an
  ISR of itself (records only the lost ISR had are gone).
- ``drop_dead_from_isr``: a live leader's ISR loses the brokers that died (not the
  last member; the epoch stays, as for the leader's own ISR shrink).
- ``elect_preferred``: the first assigned replica leads if it is live and in the ISR.
- ``elect_unclean``: a leaderless partition takes the first live replica.

Each returns the new state (same version: the write is conditional on it) or None
when nothing changes, or raises ``ElectionError`` with Kafka's error code when an
explicit election (ElectLeaders) cannot be made.

Concurrency: pure functions; call them from anywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from kio.schema.errors import ErrorCode

from tickwheel.replica import NO_LEADER, LeaderAndIsr


class ElectionError(Exception):
    """An election that cannot be made; ``error_code`` is Kafka's answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _led_by(state: LeaderAndIsr, leader: int, isr: Sequence[int], epoch: int) -> LeaderAndIsr:
    return replace(state, leader=leader, leader_epoch=epoch, isr=tuple(sorted(isr)))


def elect_offline(
    replicas: Sequence[int],
    state: LeaderAndIsr,
    live: Collection[int],
    *,
    unclean: bool,
    controller_epoch: int,
) -> LeaderAndIsr | None:
    """The new state of a partition whose leader may have died; None if it needs none."""
    if state.leader in live:
        return None
    live_isr = [broker for broker in state.isr if broker in live]
    candidates = [broker for broker in replicas if broker in live_isr]
    epoch = state.leader_epoch + 1
    if candidates:
        new = _led_by(state, candidates[0], live_isr, epoch)
    elif unclean and any(broker in live for broker in replicas):
        leader = next(broker for broker in replicas if broker in live)
        new = _led_by(state, leader, [leader], epoch)
    elif state.leader == NO_LEADER:
        return None
    else:
        new = _led_by(state, NO_LEADER, state.isr, epoch)
    return replace(new, controller_epoch=controller_epoch)


def drop_dead_from_isr(
    state: LeaderAndIsr, live: Collection[int], *, controller_epoch: int
) -> LeaderAndIsr | None:
    """A live leader's state without its dead ISR members; None if none died."""
    if state.leader not in live:
        return None
    isr = [broker for broker in state.isr if broker in live or broker == state.leader]
    if len(isr) == len(state.isr):
        return None
    return replace(state, isr=tuple(sorted(isr)), controller_epoch=controller_epoch)


def elect_preferred(
    replicas: Sequence[int], state: LeaderAndIsr, live: Collection[int], *, controller_epoch: int
) -> LeaderAndIsr:
    """The state with the preferred (first) replica leading, at the next epoch."""
    preferred = replicas[0]
    if state.leader == preferred and preferred in live:
        raise ElectionError(ErrorCode.election_not_needed, "the preferred replica leads")
    if preferred not in live or preferred not in state.isr:
        raise ElectionError(
            ErrorCode.preferred_leader_not_available,
            f"preferred replica {preferred} is not live and in the ISR",
        )
    isr = [broker for broker in state.isr if broker in live]
    new = _led_by(state, preferred, isr, state.leader_epoch + 1)
    return replace(new, controller_epoch=controller_epoch)


def elect_unclean(
    replicas: Sequence[int], state: LeaderAndIsr, live: Collection[int], *, controller_epoch: int
) -> LeaderAndIsr:
    """The state of a leaderless partition led by a live replica, in sync or not."""
    if state.leader in live:
        raise ElectionError(ErrorCode.election_not_needed, "the partition has a live leader")
    new = elect_offline(replicas, state, live, unclean=True, controller_epoch=controller_epoch)
    if new is None or new.leader == NO_LEADER:
        raise ElectionError(ErrorCode.eligible_leaders_not_available, "no assigned replica is live")
    return new
