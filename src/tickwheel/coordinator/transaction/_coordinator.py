"""``TransactionCoordinator``: Kafka's transaction coordinator logic (versions 0-2).

Every request is checked in Kafka's order (``TransactionCoordinator.scala``) and
answered with Kafka's error codes; the version down-maps (PRODUCER_FENCED for old
clients) are the API layer's. The protocol, per transactional id:

- InitProducerId: a new id gets a producer id at epoch 0 (Empty written); a known,
  idle one the next epoch (or, the epoch exhausted, a new producer id). An id with an
  Ongoing transaction (a zombie's) is fenced: its epoch is bumped, the transaction
  aborted, and the new instance told CONCURRENT_TRANSACTIONS, so that it retries and
  gets epoch + 2 once the abort is complete.
- AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added; a new
  transaction starts its ``transaction.timeout.ms`` now. A version 2 client adds
  none itself: the leader of a partition it produces to (Produce v12) and the group
  coordinator of a TxnOffsetCommit v5 add them (``add_partitions`` at version 2).
- Verification (KIP-890 part 1, ``verify_partitions``): a partition leader asks
  whether a transactional produce's partitions are in the ongoing transaction; one
  that is not is answered TRANSACTION_ABORTABLE (the leader answers its producer
  INVALID_TXN_STATE or TRANSACTION_ABORTABLE, by the Produce version).
- EndTxn: PrepareCommit/PrepareAbort written, the client answered, then the markers
  (``TransactionMarkerChannelManager``) and CompleteCommit/CompleteAbort. At version
  2 (EndTxn v5) the prepare bumps the epoch, the answer carries it, and a retry is
  recognised by its epoch being the one before (Kafka's ``retryOnEpochBump``). An
  exhausted epoch gets a new producer id first (allocated before the request is
  checked, as Kafka does), which the completion moves to at epoch 0; a retry from the
  old id at the last epoch is recognised too (``retryOnOverflow``).
- A timed-out transaction is aborted with the epoch bumped (the slow producer is fenced).
- An id idle for ``transactional.id.expiration.ms`` gets a tombstone and is forgotten.

Concurrency: event-loop thread only. Callbacks may run inside the call that starts an
append (one node: acks=all completes on its first check); each transition is
prepared completely before its append starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.transaction._markers import TransactionMarkerChannelManager
from tickwheel.coordinator.transaction._metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from tickwheel.coordinator.transaction._state_manager import (
    ListedTransaction,
    TransactionStateManager,
)
from tickwheel.replica import TopicPartition

_log = logging.getLogger(__name__)

ErrorCallback = Callable[[ErrorCode], None]
PartitionErrors = dict[TopicPartition, ErrorCode]
_COMPLETED = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
# EndTxn on a transaction that is not Ongoing: (state, commit) -> answer; others
# INVALID_TXN_STATE.
_END_ANSWERS = {
    (TransactionState.COMPLETE_COMMIT, True): ErrorCode.none,
    (TransactionState.COMPLETE_ABORT, False): ErrorCode.none,
    (TransactionState.PREPARE_COMMIT, True): ErrorCode.concurrent_transactions,
    (TransactionState.PREPARE_ABORT, False): ErrorCode.concurrent_transactions,
}
_PENDING_TIMEOUT_RETRY_MS = 100
"""How soon a timed-out transaction whose state was changing is looked at again."""


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    """InitProducerId's answer."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """EndTxn's answer: v5 also carries the producer id and epoch to go on with."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


EndTxnCallback = Callable[[EndTxnResult], None]


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """DescribeTransactions' answer for one id."""

    error: ErrorCode
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_timestamp: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    """ListTransactions' answer."""

    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


class TransactionCoordinator:
    """The transaction coordinator over a state manager and a marker channel."""

    def __init__(
        self,
        state_manager: TransactionStateManager,
        markers: TransactionMarkerChannelManager,
        *,
        allocate_producer_id: Callable[[], Awaitable[int]],
        clock_ms: Callable[[], int],
    ) -> None:
        self.state = state_manager
        self.markers = markers
        self._allocate_producer_id = allocate_producer_id
        self._clock_ms = clock_ms
        self.active = False
        self.timed_out_aborts = 0
        self._allocations: set[asyncio.Future[int]] = set()

    def startup(self) -> None:
        """Start answering."""
        self.active = True

    def shutdown(self) -> None:
        """Stop answering and forget every partition."""
        self.active = False
        self.state.unload_all()

    # -- elections ----------------------------------------------------------------

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``__transaction_state`` ``partition`` at that epoch."""
        current = self.state.coordinator_epoch(partition)
        if current is not None and current >= coordinator_epoch:
            return
        self.markers.remove_markers_for_partition(partition)
        for pending in self.state.load_partition(partition, coordinator_epoch):
            self.markers.add_txn_markers_to_send(
                pending.coordinator_epoch,
                pending.metadata.state is TransactionState.PREPARE_COMMIT,
                pending.metadata,
                pending.complete,
            )

    def on_resigned(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition``."""
        self.markers.remove_markers_for_partition(partition)
        self.state.unload_partition(partition, coordinator_epoch)

    # -- InitProducerId -----------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int
    ) -> ErrorCode | tuple[TransactionMetadata, int]:
        """Validate; the metadata (created for a new id) and its coordinator epoch, or
        the error to answer. ``handle_init_producer_id`` transitions it."""
        if not transactional_id:
            return ErrorCode.invalid_request
        if not self.state.validate_transaction_timeout_ms(timeout_ms):
            return ErrorCode.invalid_transaction_timeout
        found = self.state.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        if found[1] is None:
            producer_id = await self._allocate_producer_id()
            created = TransactionMetadata(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=NO_PRODUCER_EPOCH,
                txn_timeout_ms=timeout_ms,
                state=TransactionState.EMPTY,
                txn_last_update_timestamp=self._clock_ms(),
            )
            added = self.state.put_if_absent(created)
            if isinstance(added, ErrorCode):
                return added
            return added[1], added[0]
        return found[1], found[0]

    async def handle_init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        callback: Callable[[InitProducerIdResult], None],
    ) -> None:
        """InitProducerId with a transactional id; ``expected`` = (pid, epoch) of v3+."""
        found = await self.init_producer_id(transactional_id, timeout_ms)
        if isinstance(found, ErrorCode):
            callback(InitProducerIdResult(found))
            return
        metadata, coordinator_epoch = found
        rotate_to: int | None = None
        if metadata.producer_epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            rotate_to = await self._allocate_producer_id()
        prepared = self._prepare_init(metadata, timeout_ms, expected, rotate_to)
        if isinstance(prepared, ErrorCode):
            callback(InitProducerIdResult(prepared))
            return
        if prepared.txn_state is TransactionState.PREPARE_EPOCH_FENCE:

            def fenced(result: EndTxnResult) -> None:
                # The abort is under way: the client retries and gets epoch + 2.
                error = result.error
                callback(
                    InitProducerIdResult(
                        error if error != ErrorCode.none else ErrorCode.concurrent_transactions
                    )
                )

            self.end_transaction(
                transactional_id,
                prepared.producer_id,
                prepared.producer_epoch,
                commit=False,
                from_client=False,
                callback=fenced,
            )
            return

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.none:
                _log.info(
                    "initialized transactional id %s with producer id %d epoch %d",
                    transactional_id,
                    prepared.producer_id,
                    prepared.producer_epoch,
                )
                callback(
                    InitProducerIdResult(
                        ErrorCode.none, prepared.producer_id, prepared.producer_epoch
                    )
                )
            else:
                callback(InitProducerIdResult(error))

        self.state.append_transaction_to_log(transactional_id, coordinator_epoch, prepared, written)

    def _prepare_init(
        self,
        metadata: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        rotate_to: int | None,
    ) -> TxnTransitMetadata | ErrorCode:
        if metadata.pending_transition_in_progress:
            return ErrorCode.concurrent_transactions
        if expected is not None:
            expected_pid, expected_epoch = expected
            valid = (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected_pid == metadata.producer_id
                or (
                    expected_pid == metadata.previous_producer_id
                    and is_epoch_exhausted(expected_epoch)
                )
            )
            if not valid:
                return ErrorCode.producer_fenced
        return self._prepare_init_transit(metadata, timeout_ms, expected, rotate_to)

    def _prepare_init_transit(
        self,
        metadata: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        rotate_to: int | None,
    ) -> TxnTransitMetadata | ErrorCode:
        now = self._clock_ms()
        state = metadata.state
        if state is TransactionState.ONGOING:
            return metadata.prepare_fence_producer_epoch(now)
        if state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if state not in _COMPLETED:
            _log.error(
                "transactional id %s found in state %s",
                metadata.transactional_id,
                state.state_name,
            )
            return ErrorCode.unknown_server_error
        if metadata.producer_epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            if rotate_to is None:
                return ErrorCode.concurrent_transactions
            return metadata.prepare_producer_id_rotation(
                rotate_to, timeout_ms, now, expected is not None
            )
        return metadata.prepare_increment_producer_epoch(
            timeout_ms, None if expected is None else expected[1], now
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------

    def _existing(
        self, transactional_id: str, callback: ErrorCallback
    ) -> tuple[int, TransactionMetadata] | None:
        """The coordinator epoch and metadata of a known id; else answers ``callback``
        (INVALID_REQUEST for an empty id, the lookup's error, or
        INVALID_PRODUCER_ID_MAPPING for an id never initialised) and returns None."""
        if not transactional_id:
            callback(ErrorCode.invalid_request)
            return None
        found = self.state.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            callback(found)
            return None
        coordinator_epoch, metadata = found
        if metadata is None:
            callback(ErrorCode.invalid_producer_id_mapping)
            return None
        return coordinator_epoch, metadata

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: set[TopicPartition],
        callback: ErrorCallback,
        client_transaction_version: int = TV_0,
    ) -> None:
        """Add ``partitions`` to the id's transaction (starting one if needed)."""
        found = self._existing(transactional_id, callback)
        if found is None:
            return
        coordinator_epoch, metadata = found
        if metadata.producer_id != producer_id:
            error = ErrorCode.invalid_producer_id_mapping
        elif metadata.producer_epoch != producer_epoch:
            error = ErrorCode.producer_fenced
        elif metadata.pending_transition_in_progress or metadata.state in (
            TransactionState.PREPARE_COMMIT,
            TransactionState.PREPARE_ABORT,
        ):
            error = ErrorCode.concurrent_transactions
        elif metadata.state is TransactionState.ONGOING and partitions <= metadata.topic_partitions:
            error = ErrorCode.none
        else:
            transit = metadata.prepare_add_partitions(
                partitions, self._clock_ms(), client_transaction_version
            )
            self.state.append_transaction_to_log(
                transactional_id, coordinator_epoch, transit, callback
            )
            return
        callback(error)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: set[TopicPartition],
    ) -> PartitionErrors:
        """Whether each partition is in the id's ongoing transaction (Kafka's
        ``handleVerifyPartitionsInTransaction``); a pending transition is not waited
        for, since the leader's append checks again."""
        error: ErrorCode | None = None
        if not transactional_id:
            error = ErrorCode.invalid_request
        else:
            found = self.state.get_transaction_state(transactional_id)
            if isinstance(found, ErrorCode):
                error = found
            elif found[1] is None or found[1].producer_id != producer_id:
                error = ErrorCode.invalid_producer_id_mapping
            elif found[1].producer_epoch != producer_epoch:
                error = ErrorCode.producer_fenced
            elif found[1].state in (
                TransactionState.PREPARE_COMMIT,
                TransactionState.PREPARE_ABORT,
            ):
                error = ErrorCode.concurrent_transactions
            else:
                added = found[1].topic_partitions
                return {
                    tp: ErrorCode.none if tp in added else ErrorCode.transaction_abortable
                    for tp in partitions
                }
        return dict.fromkeys(partitions, error)

    # -- EndTxn -------------------------------------------------------------------

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool,
        callback: EndTxnCallback,
        client_transaction_version: int | None = None,
    ) -> None:
        """Commit or abort the id's transaction. ``client_transaction_version`` is the
        client's (2 from EndTxn v5: the epoch is bumped); None for the coordinator's
        own aborts, which keep the transaction's."""
        found = self._existing(transactional_id, lambda error: callback(EndTxnResult(error)))
        if found is None:
            return
        metadata = found[1]
        version = (
            metadata.client_transaction_version
            if client_transaction_version is None
            else client_transaction_version
        )

        def proceed(next_producer_id: int) -> None:
            self._end_transaction(
                transactional_id,
                producer_id,
                producer_epoch,
                commit=commit,
                from_client=from_client,
                callback=callback,
                client_transaction_version=version,
                next_producer_id=next_producer_id,
            )

        if (
            version >= TV_2
            and from_client
            and metadata.pending_state is not TransactionState.PREPARE_EPOCH_FENCE
            and is_epoch_exhausted(metadata.producer_epoch)
        ):
            allocation = asyncio.ensure_future(self._allocate_producer_id())
            self._allocations.add(allocation)

            def allocated(task: asyncio.Future[int]) -> None:
                self._allocations.discard(task)
                if task.cancelled() or task.exception() is not None:
                    _log.warning("no producer id for %s's next epochs", transactional_id)
                    callback(EndTxnResult(ErrorCode.coordinator_not_available))
                    return
                proceed(task.result())

            allocation.add_done_callback(allocated)
            return
        proceed(NO_PRODUCER_ID)

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool,
        callback: EndTxnCallback,
        client_transaction_version: int,
        next_producer_id: int,
    ) -> None:
        found = self._existing(transactional_id, lambda error: callback(EndTxnResult(error)))
        if found is None:
            return
        coordinator_epoch, metadata = found
        prepared = self._prepare_end(
            metadata,
            producer_id,
            producer_epoch,
            commit,
            from_client,
            client_transaction_version,
            next_producer_id,
        )
        if isinstance(prepared, EndTxnResult):
            callback(prepared)
            return
        fencing = not from_client
        expected = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT

        def prepared_written(error: ErrorCode) -> None:
            if error != ErrorCode.none:
                if fencing:
                    metadata.has_failed_epoch_fence = True
                callback(EndTxnResult(error))
                return
            again = self.state.get_transaction_state(transactional_id)
            if isinstance(again, ErrorCode):
                callback(EndTxnResult(again))
                return
            epoch_now, current = again
            if current is None or epoch_now != coordinator_epoch:
                callback(EndTxnResult(ErrorCode.not_coordinator))
                return
            if current.producer_id != producer_id:
                callback(EndTxnResult(ErrorCode.invalid_producer_id_mapping))
                return
            if current.producer_epoch != prepared.producer_epoch:
                callback(EndTxnResult(ErrorCode.producer_fenced))
                return
            if current.state is not expected or current.pending_transition_in_progress:
                callback(EndTxnResult(ErrorCode.invalid_txn_state))
                return
            complete = current.prepare_complete(self._clock_ms())
            callback(EndTxnResult(ErrorCode.none, complete.producer_id, complete.producer_epoch))
            self.markers.add_txn_markers_to_send(coordinator_epoch, commit, current, complete)

        self.state.append_transaction_to_log(
            transactional_id, coordinator_epoch, prepared, prepared_written
        )

    def _prepare_end(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        client_transaction_version: int,
        next_producer_id: int,
    ) -> TxnTransitMetadata | EndTxnResult:
        pending = metadata.pending_state
        fence = pending is TransactionState.PREPARE_EPOCH_FENCE
        v2 = client_transaction_version >= TV_2
        may_retry = (
            v2
            and from_client
            and not fence
            and metadata.state not in (TransactionState.ONGOING, TransactionState.EMPTY)
        )
        # A version 2 client retrying an EndTxn whose prepare bumped the epoch, or whose
        # completion moved to a new producer id (the old one's epochs exhausted).
        retry_on_overflow = (
            may_retry
            and metadata.previous_producer_id == producer_id
            and producer_epoch == MAX_PRODUCER_EPOCH - 1
            and metadata.producer_epoch == 0
        )
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        # The bump of an EndTxn keeps the epoch before it as the last one; a fence's
        # bump (a timeout, a new instance) does not, so its victim is fenced.
        retry = retry_on_overflow or (may_retry and metadata.producer_epoch == producer_epoch + 1)
        preparing = metadata.state in (
            TransactionState.PREPARE_COMMIT,
            TransactionState.PREPARE_ABORT,
        )
        if (
            not retry
            and (
                (from_client and producer_epoch != metadata.producer_epoch)
                or producer_epoch < metadata.producer_epoch
            )
        ) or (may_retry and preparing and not retry):
            # At version 2 a prepared transaction's epoch is already bumped: only a
            # retry may name the one before it.
            return EndTxnResult(ErrorCode.producer_fenced)
        if pending is not None and not fence:
            return EndTxnResult(ErrorCode.concurrent_transactions)
        target = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if metadata.state is not TransactionState.ONGOING:
            return self._end_not_ongoing(
                metadata, target, retry, client_transaction_version, next_producer_id
            )
        if fence:
            if commit:
                return EndTxnResult(ErrorCode.invalid_txn_state)
            # The fence's bumped epoch becomes the transaction's (Kafka does the same);
            # the abort does not bump it again.
            metadata.pending_state = None
            metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        return metadata.prepare_abort_or_commit(
            target,
            self._clock_ms(),
            client_transaction_version,
            bump_epoch=v2 and not fence,
            next_producer_id=next_producer_id,
        )

    def _end_not_ongoing(
        self,
        metadata: TransactionMetadata,
        target: TransactionState,
        retry: bool,
        client_transaction_version: int,
        next_producer_id: int,
    ) -> TxnTransitMetadata | EndTxnResult:
        """EndTxn on a transaction that is not Ongoing."""
        state = metadata.state
        commit = target is TransactionState.PREPARE_COMMIT
        v2 = client_transaction_version >= TV_2
        if v2 and not commit and not retry and state in _COMPLETED:
            # Version 2 may abort a transaction that never added a partition.
            return metadata.prepare_abort_or_commit(
                target,
                self._clock_ms(),
                client_transaction_version,
                bump_epoch=True,
                next_producer_id=next_producer_id,
            )
        if v2 and not retry and state in _COMPLETED:
            # A commit with nothing open (an abort was handled above).
            return EndTxnResult(ErrorCode.invalid_txn_state)
        # A retried EndTxn of a finished transaction succeeds; one still finishing is
        # retried by the client; anything else is a misuse (fatal in clients).
        error = _END_ANSWERS.get((state, commit), ErrorCode.invalid_txn_state)
        if error == ErrorCode.none:
            return EndTxnResult(error, metadata.producer_id, metadata.producer_epoch)
        return EndTxnResult(error)

    # -- timers -------------------------------------------------------------------

    def abort_timed_out(
        self, transactional_id: str, producer_id: int, producer_epoch: int, start_ms: int
    ) -> None:
        """A transaction's ``transaction.timeout.ms`` passed: fence and abort it."""
        self.state.timeouts.timeout_fired(transactional_id)
        found = self.state.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode) or found[1] is None:
            return
        metadata = found[1]
        if (
            metadata.producer_id != producer_id
            or metadata.producer_epoch != producer_epoch
            or metadata.state is not TransactionState.ONGOING
            or metadata.txn_start_timestamp != start_ms
        ):
            return
        if metadata.pending_transition_in_progress:
            self.state.timeouts.rearm_timeout(metadata, _PENDING_TIMEOUT_RETRY_MS)
            return
        transit = metadata.prepare_fence_producer_epoch(self._clock_ms())
        _log.info(
            "aborting transaction of %s (producer id %d, epoch %d): timed out after %d ms",
            transactional_id,
            producer_id,
            producer_epoch,
            metadata.txn_timeout_ms,
        )
        self.timed_out_aborts += 1

        def aborted(result: EndTxnResult) -> None:
            error = result.error
            if error == ErrorCode.none:
                _log.debug("timed-out abort of %s written", transactional_id)
                return
            # Still Ongoing (the PrepareAbort append failed): try again when Kafka's
            # scan would next find it, or the transaction's partitions keep their LSO.
            retry_ms = self.state.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            _log.warning(
                "timed-out abort of %s failed (%s); retrying in %d ms",
                transactional_id,
                error.name,
                retry_ms,
            )
            if (
                metadata.state is TransactionState.ONGOING
                and not metadata.pending_transition_in_progress
            ):
                self.state.timeouts.rearm_timeout(metadata, retry_ms)

        self.end_transaction(
            transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            commit=False,
            from_client=False,
            callback=aborted,
        )

    def expire(self, transactional_id: str) -> None:
        """``transactional.id.expiration.ms`` may have passed: tombstone the id."""
        timeouts = self.state.timeouts
        timeouts.expiration_fired(transactional_id)
        found = self.state.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode) or found[1] is None:
            return
        coordinator_epoch, metadata = found[0], found[1]
        now = self._clock_ms()
        expiration_ms = self.state.config.transactional_id_expiration_ms
        if not metadata.state.expiration_allowed:
            return
        if metadata.pending_transition_in_progress:
            timeouts.arm_expiration_in(transactional_id, _PENDING_TIMEOUT_RETRY_MS)
            return
        if metadata.txn_last_update_timestamp > now - expiration_ms:
            timeouts.arm_expiration(metadata, now)
            return
        metadata.prepare_dead(now)

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.none:
                _log.info("transactional id %s expired", transactional_id)
                self.state.remove_if_same(transactional_id, coordinator_epoch, metadata)
                return
            metadata.abandon_pending()
            if self.state.coordinator_epoch(self.state.partition_for(transactional_id)) == (
                coordinator_epoch
            ):
                timeouts.arm_expiration_in(transactional_id, _PENDING_TIMEOUT_RETRY_MS)

        self.state.append_tombstone(transactional_id, coordinator_epoch, written)

    # -- DescribeTransactions / ListTransactions ------------------------------------

    def describe(self, transactional_id: str) -> DescribedTransaction:
        """DescribeTransactions for one id."""
        if not self.active:
            return DescribedTransaction(ErrorCode.coordinator_not_available, transactional_id)
        if not transactional_id:
            return DescribedTransaction(ErrorCode.invalid_request, transactional_id)
        found = self.state.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return DescribedTransaction(found, transactional_id)
        metadata = found[1]
        if metadata is None or metadata.state is TransactionState.DEAD:
            return DescribedTransaction(ErrorCode.transactional_id_not_found, transactional_id)
        return DescribedTransaction(
            ErrorCode.none,
            transactional_id,
            state=metadata.state.state_name,
            timeout_ms=metadata.txn_timeout_ms,
            start_timestamp=metadata.txn_start_timestamp,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            partitions=frozenset(metadata.topic_partitions),
        )

    def list_transactions(
        self, state_filters: tuple[str, ...], producer_ids: tuple[int, ...], duration_ms: int
    ) -> ListTransactionsResult:
        """ListTransactions over the partitions this broker coordinates."""
        if not self.active:
            return ListTransactionsResult(ErrorCode.coordinator_not_available)
        states = set()
        unknown = []
        for name in state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        if unknown and not states:
            # Only unknown filters: nothing can match (Kafka answers them and no entry).
            return ListTransactionsResult(ErrorCode.none, tuple(unknown))
        listed = self.state.list_transactions(
            frozenset(producer_ids), frozenset(states), duration_ms
        )
        return ListTransactionsResult(ErrorCode.none, tuple(unknown), tuple(listed))
