"""TransactionMetadata: every transition of Kafka's state table, valid and invalid."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator.transaction import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from tickwheel.replica import TopicPartition

S = TransactionState
NOW = 1_000
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)

VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    # Transaction version 2 may abort a transaction that never added a partition.
    S.PREPARE_ABORT: {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    },
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def metadata(state: TransactionState, *, epoch: int = 3) -> TransactionMetadata:
    started = state not in {S.EMPTY}
    return TransactionMetadata(
        transactional_id="tx",
        producer_id=7,
        producer_epoch=epoch,
        txn_timeout_ms=60_000,
        state=state,
        txn_last_update_timestamp=0,
        topic_partitions={T0} if state in {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT} else set(),
        txn_start_timestamp=500 if started else -1,
    )


def prepare(target: TransactionState) -> Callable[[TransactionMetadata], object]:
    """The prepare call that aims at ``target`` (whatever the source state)."""
    calls: dict[TransactionState, Callable[[TransactionMetadata], object]] = {
        S.EMPTY: lambda m: m.prepare_increment_producer_epoch(60_000, None, NOW),
        S.ONGOING: lambda m: m.prepare_add_partitions({T1}, NOW),
        S.PREPARE_COMMIT: lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW),
        S.PREPARE_ABORT: lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, NOW),
        S.COMPLETE_COMMIT: lambda m: m._transit(S.COMPLETE_COMMIT, now_ms=NOW),
        S.COMPLETE_ABORT: lambda m: m._transit(S.COMPLETE_ABORT, now_ms=NOW),
        S.DEAD: lambda m: m.prepare_dead(NOW),
        S.PREPARE_EPOCH_FENCE: lambda m: m.prepare_fence_producer_epoch(NOW),
    }
    return calls[target]


@pytest.mark.parametrize("target", list(S))
@pytest.mark.parametrize("source", list(S))
def test_each_transition_is_allowed_exactly_from_its_valid_previous_states(
    source: TransactionState, target: TransactionState
) -> None:
    m = metadata(source)
    if source in VALID_PREVIOUS[target]:
        transit = prepare(target)(m)
        assert isinstance(transit, TxnTransitMetadata)
        assert transit.txn_state is target
        assert m.pending_state is target
    else:
        with pytest.raises(IllegalTransitionError):
            prepare(target)(m)
        assert m.pending_state is None
    assert target.valid_previous == VALID_PREVIOUS[target]


def test_a_pending_transition_blocks_every_other() -> None:
    m = metadata(S.ONGOING)
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions({T1}, NOW)
    m.abandon_pending()
    assert m.prepare_add_partitions({T1}, NOW).topic_partitions == {T0, T1}


def test_state_ids_names_and_expiration() -> None:
    assert [(s.value, s.state_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_name("Ongoing") is S.ONGOING
    assert S.from_name("ongoing") is None


def test_a_whole_transaction_completes_each_step() -> None:
    m = metadata(S.EMPTY)
    for step in (
        lambda: m.prepare_add_partitions({T0}, 10),
        lambda: m.prepare_add_partitions({T1}, 20),
        lambda: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 30),
    ):
        m.complete_transition_to(step())
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.PREPARE_COMMIT, {T0, T1}, 10)
    m.remove_partition(T0)
    m.remove_partition(T1)
    m.complete_transition_to(m.prepare_complete(40))
    assert (m.state, m.topic_partitions, m.txn_last_update_timestamp) == (
        S.COMPLETE_COMMIT,
        set(),
        40,
    )
    assert m.pending_state is None


def test_remove_partition_only_while_preparing() -> None:
    with pytest.raises(IllegalTransitionError):
        metadata(S.ONGOING).remove_partition(T0)


def test_complete_checks_the_pending_state() -> None:
    m = metadata(S.ONGOING)
    transit = m.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    m.abandon_pending()
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(transit)


def test_complete_checks_kafkas_invariants() -> None:
    m = metadata(S.ONGOING)
    transit = m.prepare_add_partitions({T1}, NOW)
    forged = TxnTransitMetadata(**{**_fields(transit), "producer_epoch": 9})
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(forged)
    shrunk = TxnTransitMetadata(**{**_fields(transit), "topic_partitions": frozenset()})
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(shrunk)


def _fields(transit: TxnTransitMetadata) -> dict[str, object]:
    return {name: getattr(transit, name) for name in transit.__dataclass_fields__}


def test_init_bumps_the_epoch_and_a_retry_gets_the_same_one() -> None:
    m = metadata(S.COMPLETE_COMMIT, epoch=3)
    transit = m.prepare_increment_producer_epoch(60_000, 3, NOW)
    assert isinstance(transit, TxnTransitMetadata)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (4, 3)
    assert (transit.topic_partitions, transit.txn_start_timestamp) == (frozenset(), -1)
    m.complete_transition_to(transit)
    retried = m.prepare_increment_producer_epoch(60_000, 3, NOW)
    assert isinstance(retried, TxnTransitMetadata)
    assert (retried.producer_epoch, retried.last_producer_epoch) == (4, 3)
    m.abandon_pending()
    assert m.prepare_increment_producer_epoch(60_000, 1, NOW) == ErrorCode.producer_fenced
    blind = m.prepare_increment_producer_epoch(60_000, None, NOW)
    assert isinstance(blind, TxnTransitMetadata)
    assert (blind.producer_epoch, blind.last_producer_epoch) == (5, -1)


def test_fencing_bumps_once_even_after_a_failed_fence() -> None:
    m = metadata(S.ONGOING, epoch=3)
    assert m.prepare_fence_producer_epoch(NOW).producer_epoch == 4
    m.abandon_pending()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch(NOW).producer_epoch == 3


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    m = metadata(S.COMPLETE_ABORT, epoch=32766)
    assert m.producer_epoch_exhausted
    with pytest.raises(IllegalTransitionError):
        m.prepare_increment_producer_epoch(60_000, None, NOW)
    transit = m.prepare_producer_id_rotation(99, 60_000, NOW, record_last_epoch=True)
    m.complete_transition_to(transit)
    assert (m.producer_id, m.previous_producer_id, m.producer_epoch, m.last_producer_epoch) == (
        99,
        7,
        0,
        32766,
    )


def test_complete_clears_a_failed_fence() -> None:
    m = metadata(S.PREPARE_ABORT)
    m.has_failed_epoch_fence = True
    m.remove_partition(T0)
    m.complete_transition_to(m.prepare_complete(NOW))
    assert (m.state, m.has_failed_epoch_fence) == (S.COMPLETE_ABORT, False)
