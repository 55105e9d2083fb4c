"""Transaction states and ``TransactionMetadata``: Kafka's prepare/complete protocol.

A transactional id's metadata changes in two steps, as in Kafka's
``TransactionMetadata``: a ``prepare_*`` call checks the transition, records the
target state as ``pending_state`` and returns the immutable target
(``TxnTransitMetadata``); once the target is in ``__transaction_state``,
``complete_transition_to`` checks Kafka's invariants and applies it. While a state is
pending no other transition may start (the coordinator answers CONCURRENT_TRANSACTIONS).

States (ids as written in the log) and the states each may follow:

==================  ==  ==========================================  ==========
state               id  valid previous states                       expires
==================  ==  ==========================================  ==========
Empty               0   Empty, CompleteCommit, CompleteAbort        yes
Ongoing             1   Ongoing, Empty, CompleteCommit, CompleteAbort  no
PrepareCommit       2   Ongoing                                     no
PrepareAbort        3   Ongoing, PrepareEpochFence (TV2 also:       no
                        Empty, CompleteCommit, CompleteAbort)
CompleteCommit      4   PrepareCommit                               yes
CompleteAbort       5   PrepareAbort                                yes
Dead                6   Empty, CompleteCommit, CompleteAbort        no
PrepareEpochFence   7   Ongoing                                     no
==================  ==  ==========================================  ==========

PrepareEpochFence is pending-only (the bumped epoch of a fenced or timed-out
transaction, turned at once into PrepareAbort); Dead is the state of an id being
expired (its tombstone is written, then it is removed).

``client_transaction_version`` is the transaction version of the client that last
moved the transaction (Kafka's ``clientTransactionVersion``): 0/1 when it came
through AddPartitionsToTxn v0-3 and EndTxn v0-4, 2 when it came through a Produce
v12 (the leader adding the partition) or EndTxn v5. At version 0/1 the epoch moves
only on InitProducerId, on fencing and on a timeout abort. At version 2 (KIP-890 part
2) ``prepare_abort_or_commit`` also bumps it, so every transaction has its own epoch
and its markers carry it; an abort may then also end a transaction with no partition
(PrepareAbort after a completed state, starting now). When the epoch is exhausted the
prepare still bumps it (to 32767 at most) and records ``next_producer_id``, a new
producer id that ``prepare_complete`` moves to at epoch 0, keeping the old one as
``previous_producer_id`` (so that a retried EndTxn is recognised).

Concurrency: event-loop thread only, like the coordinator that owns these objects.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tickwheel.replica import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue
TV_0 = 0
TV_2 = 2
"""Transaction versions: 0 (and 1) the classic protocol, 2 an epoch per transaction."""


class TransactionState(enum.Enum):
    """A transactional id's state; ``value`` is its id in ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions)."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether ``transactional.id.expiration.ms`` may remove an id in this state."""
        return self in _EXPIRABLE

    @property
    def valid_previous(self) -> frozenset[TransactionState]:
        """The states this one may follow."""
        return _VALID_PREVIOUS[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state Kafka calls ``name``, or None."""
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_COMPLETED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_EXPIRABLE = _COMPLETED
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: _COMPLETED,
    _S.ONGOING: _COMPLETED | {_S.ONGOING},
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: _COMPLETED | {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _COMPLETED,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: one more bump must leave room for a fence."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


class IllegalTransitionError(RuntimeError):
    """A transition that Kafka's ``TransactionMetadata`` refuses (a coordinator bug)."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to the log."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = TV_0


@dataclass(eq=False)
class TransactionMetadata:
    """One transactional id's state, as the coordinator caches it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = NO_TIMESTAMP
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False
    client_transaction_version: int = TV_0

    @property
    def pending_transition_in_progress(self) -> bool:
        """Whether a prepared transition waits for its append."""
        return self.pending_state is not None

    @property
    def producer_epoch_exhausted(self) -> bool:
        """Whether the next InitProducerId must rotate the producer id."""
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(
        self,
        state: TransactionState,
        *,
        producer_id: int | None = None,
        previous_producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        topic_partitions: frozenset[TopicPartition] | None = None,
        txn_start_timestamp: int | None = None,
        client_transaction_version: int | None = None,
        next_producer_id: int | None = None,
        now_ms: int,
    ) -> TxnTransitMetadata:
        """Check that ``state`` may follow the current state; record it as pending."""
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: transition to {state.state_name} while "
                f"{self.pending_state.state_name} is pending"
            )
        if self.state not in state.valid_previous:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {state.state_name} cannot follow {self.state.state_name}"
            )
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id=self.producer_id if producer_id is None else producer_id,
            previous_producer_id=self.previous_producer_id
            if previous_producer_id is None
            else previous_producer_id,
            next_producer_id=self.next_producer_id
            if next_producer_id is None
            else next_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=self.last_producer_epoch
            if last_producer_epoch is None
            else last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            txn_state=state,
            topic_partitions=frozenset(self.topic_partitions)
            if topic_partitions is None
            else topic_partitions,
            txn_start_timestamp=self.txn_start_timestamp
            if txn_start_timestamp is None
            else txn_start_timestamp,
            txn_last_update_timestamp=now_ms,
            client_transaction_version=self.client_transaction_version
            if client_transaction_version is None
            else client_transaction_version,
        )

    # -- prepare ------------------------------------------------------------------

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on a completed id: the next epoch, or PRODUCER_FENCED.

        A retried call whose epoch is the one before the last bump gets the current
        epoch again (Kafka's ``prepareIncrementProducerEpoch``).
        """
        if is_epoch_exhausted(self.producer_epoch):
            raise IllegalTransitionError(f"{self.transactional_id}: producer epoch exhausted")
        if expected_epoch is None:
            epoch, last = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._transit(
            TransactionState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=NO_TIMESTAMP,
            now_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId with the epoch exhausted: a new producer id at epoch 0."""
        if self.pending_state is not None:
            raise IllegalTransitionError(f"{self.transactional_id}: transition pending")
        return self._transit(
            TransactionState.EMPTY,
            producer_id=new_producer_id,
            previous_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=NO_TIMESTAMP,
            now_ms=now_ms,
        )

    def prepare_fence_producer_epoch(self, now_ms: int) -> TxnTransitMetadata:
        """Fence an Ongoing transaction: the next epoch (kept if a fence failed before)."""
        if is_epoch_exhausted(self.producer_epoch) and not self.has_failed_epoch_fence:
            raise IllegalTransitionError(
                f"{self.transactional_id}: cannot fence producer epoch {self.producer_epoch}"
            )
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._transit(
            TransactionState.PREPARE_EPOCH_FENCE,
            producer_epoch=epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            now_ms=now_ms,
        )

    def prepare_add_partitions(
        self,
        partitions: set[TopicPartition],
        now_ms: int,
        client_transaction_version: int = TV_0,
    ) -> TxnTransitMetadata:
        """Ongoing with ``partitions`` added; a new transaction starts now."""
        if self.state in _COMPLETED:
            return self._transit(
                TransactionState.ONGOING,
                topic_partitions=frozenset(partitions),
                txn_start_timestamp=now_ms,
                client_transaction_version=client_transaction_version,
                now_ms=now_ms,
            )
        return self._transit(
            TransactionState.ONGOING,
            topic_partitions=frozenset(self.topic_partitions | partitions),
            client_transaction_version=client_transaction_version,
            now_ms=now_ms,
        )

    def prepare_abort_or_commit(
        self,
        state: TransactionState,
        now_ms: int,
        client_transaction_version: int = TV_0,
        *,
        bump_epoch: bool = False,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransitMetadata:
        """PrepareCommit or PrepareAbort; ``bump_epoch`` (version 2) moves the epoch on,
        and an exhausted epoch needs ``next_producer_id`` to complete with.

        A version 2 abort of a transaction with no partition (from a completed state)
        starts it now, as Kafka does.
        """
        if state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransitionError(f"{state.state_name} is not a prepare state")
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if bump_epoch:
            if epoch >= MAX_PRODUCER_EPOCH or (
                is_epoch_exhausted(epoch) and next_producer_id == NO_PRODUCER_ID
            ):
                raise IllegalTransitionError(
                    f"{self.transactional_id}: epoch {epoch} bumped without a next producer id"
                )
            epoch, last = epoch + 1, epoch
        return self._transit(
            state,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_start_timestamp=now_ms if self.state in _COMPLETED else None,
            client_transaction_version=client_transaction_version,
            next_producer_id=next_producer_id,
            now_ms=now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """CompleteCommit or CompleteAbort after PrepareCommit or PrepareAbort; at
        version 2 with a next producer id, that id at epoch 0."""
        target = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        if self.client_transaction_version >= TV_2 and self.next_producer_id != NO_PRODUCER_ID:
            return self._transit(
                target,
                producer_id=self.next_producer_id,
                previous_producer_id=self.producer_id,
                producer_epoch=0,
                next_producer_id=NO_PRODUCER_ID,
                topic_partitions=frozenset(),
                now_ms=now_ms,
            )
        return self._transit(target, topic_partitions=frozenset(), now_ms=now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransitMetadata:
        """Dead: the id is being expired."""
        return self._transit(TransactionState.DEAD, topic_partitions=frozenset(), now_ms=now_ms)

    def abandon_pending(self) -> None:
        """Forget the pending transition (its append failed)."""
        self.pending_state = None

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker reached ``tp`` (only while PrepareCommit or PrepareAbort)."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransitionError(
                f"{self.transactional_id}: remove {tp} in state {self.state.state_name}"
            )
        self.topic_partitions.discard(tp)

    # -- complete -----------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` (now in the log) after checking Kafka's invariants."""
        target = transit.txn_state
        if self.pending_state is not target:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing {target.state_name}, pending "
                f"{self.pending_state.state_name if self.pending_state else None}"
            )
        if self.state not in target.valid_previous:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {target.state_name} cannot follow "
                f"{self.state.state_name}"
            )
        self._check_invariants(transit)
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.state = target
        self.pending_state = None
        if target in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            self.has_failed_epoch_fence = False

    def _check_invariants(self, transit: TxnTransitMetadata) -> None:
        target = transit.txn_state
        same_producer = (
            transit.producer_id == self.producer_id
            and transit.producer_epoch == self.producer_epoch
        )
        if target is TransactionState.EMPTY:
            valid_epoch = (
                transit.producer_epoch in (self.producer_epoch, self.producer_epoch + 1)
                or transit.producer_epoch == 0
            )
            ok = valid_epoch and not transit.topic_partitions
            ok = ok and transit.txn_start_timestamp == NO_TIMESTAMP
        elif target is TransactionState.ONGOING:
            ok = (
                same_producer
                and self.topic_partitions <= transit.topic_partitions
                and transit.txn_timeout_ms == self.txn_timeout_ms
            )
        elif target in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            bumped = (
                transit.client_transaction_version >= TV_2
                and transit.producer_id == self.producer_id
                and transit.producer_epoch == self.producer_epoch + 1
            )
            ok = (
                (same_producer or bumped)
                and transit.topic_partitions == frozenset(self.topic_partitions)
                and transit.txn_timeout_ms == self.txn_timeout_ms
                and (
                    transit.txn_start_timestamp == self.txn_start_timestamp
                    or self.state in _COMPLETED
                )
            )
        elif target in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            rotated = (
                self.next_producer_id != NO_PRODUCER_ID
                and transit.producer_id == self.next_producer_id
                and transit.producer_epoch == 0
            )
            ok = (same_producer or rotated) and transit.txn_timeout_ms == self.txn_timeout_ms
            ok = ok and transit.txn_start_timestamp != NO_TIMESTAMP
        else:
            ok = target is TransactionState.DEAD
        if not ok:
            raise IllegalTransitionError(
                f"{self.transactional_id}: invalid transition from {self}"
                f" to {transit} ({target.state_name})"
            )
