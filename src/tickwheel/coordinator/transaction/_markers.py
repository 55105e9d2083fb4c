"""``TransactionMarkerChannelManager``: COMMIT/ABORT markers to a transaction's partitions.

After PrepareCommit or PrepareAbort is in the log (and the client has its answer),
every partition of the transaction gets a marker; once all have it, the coordinator
writes CompleteCommit/CompleteAbort (Kafka's ``TransactionMarkerChannelManager`` and
``TransactionMarkerRequestCompletionHandler``):

- Partitions this broker leads get theirs through
  ``ReplicaManager.append_txn_markers`` directly (Kafka sends WriteTxnMarkers to
  itself): on a single node the markers and the Complete append finish inside the
  callback chain of the EndTxn append, before the client's next request is read, so
  the next AddPartitionsToTxn never meets CONCURRENT_TRANSACTIONS.
- Partitions led by another broker are queued per broker; one sender task per broker
  drains its queue into one WriteTxnMarkers v1 request through the injected
  ``MarkerTransport`` (``tickwheel.cluster``'s, over the broker channels). A failed
  request (connection, timeout) puts its markers back after ``retry.backoff.ms``, to
  be routed again to the then leaders.
- A partition whose leader is unknown waits and is routed again after
  ``retry.backoff.ms``; one whose topic is gone is skipped ("likely deleted").

Per partition answer: NONE removes it from the transaction; UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT and
KAFKA_STORAGE_ERROR retry it (logged at INFO, as Kafka does);
UNSUPPORTED_FOR_MESSAGE_FORMAT and UNSUPPORTED_VERSION skip it; INVALID_PRODUCER_EPOCH
and TRANSACTION_COORDINATOR_FENCED stop the sending (a newer producer epoch or
coordinator owns the transaction); anything else is a bug, logged, and stops it too.
Before applying answers, a transaction whose coordinator epoch changed or that is no
longer coordinated here is dropped (its new coordinator completes it). A Complete
append that fails with COORDINATOR_NOT_AVAILABLE is retried.

Concurrency: event-loop thread only; retries run on a timer of the broker's
``LoopTimers``, sender tasks on the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.transaction._metadata import TransactionMetadata, TxnTransitMetadata
from tickwheel.coordinator.transaction._state_manager import TransactionStateManager
from tickwheel.replica import NO_LEADER, ReplicaManager, TopicPartition, TxnMarker
from tickwheel.timer import CallbackTask, SystemTimer

_log = logging.getLogger(__name__)

_CONNECTION_ERRORS = (OSError, TimeoutError, EOFError, asyncio.IncompleteReadError)


class MarkerTransport(Protocol):
    """WriteTxnMarkers to another broker."""

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> dict[int, dict[TopicPartition, int]]:
        """Send ``markers``; ``{producer_id: {tp: error code}}``. Raises on a lost request."""
        ...

    async def close(self) -> None:
        """Close the connections to other brokers (at shutdown)."""
        ...


LeaderLookup = Callable[[TopicPartition], int | None]
"""The leader of a partition; ``NO_LEADER`` if unknown for now; None if no such topic."""

_RETRY = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
    }
)
_SKIP = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})
_FENCED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})


@dataclass(frozen=True, slots=True)
class PendingCompleteTxn:
    """A transaction whose markers are being written, with the producer id and epoch of
    its prepared state, which the markers carry (``complete`` may name the next
    producer id: a version 2 transaction at the end of its epochs)."""

    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    complete: TxnTransitMetadata
    commit: bool
    producer_id: int
    producer_epoch: int


class TransactionMarkerChannelManager:
    """Sends the markers of completed transactions, then logs their completion."""

    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        state_manager: TransactionStateManager,
        timer: SystemTimer,
        *,
        leader_of: LeaderLookup,
        transport: MarkerTransport | None = None,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self._broker_id = broker_id
        self._replica_manager = replica_manager
        self._state = state_manager
        self._timer = timer
        self._leader_of = leader_of
        self._transport = transport
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._pending: dict[str, PendingCompleteTxn] = {}
        self._queues: dict[int, list[tuple[PendingCompleteTxn, TxnMarker]]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._closed = False

    @property
    def pending(self) -> dict[str, PendingCompleteTxn]:
        """Transactions whose markers are not all written, by transactional id."""
        return self._pending

    def add_txn_markers_to_send(
        self,
        coordinator_epoch: int,
        commit: bool,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
    ) -> None:
        """Write the markers of ``metadata``'s transaction, then ``complete``."""
        entry = PendingCompleteTxn(
            metadata.transactional_id,
            coordinator_epoch,
            metadata,
            complete,
            commit,
            metadata.producer_id,
            metadata.producer_epoch,
        )
        self._pending[entry.transactional_id] = entry
        self._route(entry, set(metadata.topic_partitions))

    def _route(self, entry: PendingCompleteTxn, partitions: set[TopicPartition]) -> None:
        if self._pending.get(entry.transactional_id) is not entry or self._closed:
            return
        local: list[TopicPartition] = []
        remote: dict[int, list[TopicPartition]] = {}
        waiting: set[TopicPartition] = set()
        for tp in sorted(partitions):
            leader = self._leader_of(tp)
            if leader is None:
                _log.info("%s: topic of %s is gone, no marker", entry.transactional_id, tp)
                entry.metadata.remove_partition(tp)
            elif leader == NO_LEADER:
                waiting.add(tp)
            elif leader == self._broker_id:
                local.append(tp)
            else:
                remote.setdefault(leader, []).append(tp)
        if waiting:
            self._retry_later(entry, waiting)
        for broker_id, tps in remote.items():
            self._enqueue(broker_id, entry, self._marker(entry, tps))
        if local:
            self._replica_manager.append_txn_markers(
                [self._marker(entry, local)],
                self._request_timeout_ms,
                lambda results: self._on_results(entry, results),
            )
        elif not waiting and not remote:
            self._maybe_write_completion(entry)

    def _marker(self, entry: PendingCompleteTxn, tps: Sequence[TopicPartition]) -> TxnMarker:
        return TxnMarker(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            coordinator_epoch=entry.coordinator_epoch,
            commit=entry.commit,
            partitions=tuple(tps),
        )

    def _retry_later(self, entry: PendingCompleteTxn, partitions: set[TopicPartition]) -> None:
        self._timer.add(
            CallbackTask(self._retry_backoff_ms, lambda: self._route(entry, partitions))
        )

    def _still_ours(self, entry: PendingCompleteTxn) -> bool:
        if self._pending.get(entry.transactional_id) is not entry:
            return False
        state = self._state.get_transaction_state(entry.transactional_id)
        if isinstance(state, ErrorCode):
            return False
        epoch, metadata = state
        return metadata is entry.metadata and epoch == entry.coordinator_epoch

    def _on_results(
        self, entry: PendingCompleteTxn, results: dict[int, dict[TopicPartition, int]]
    ) -> None:
        if not self._still_ours(entry):
            self._drop(entry)
            return
        retry: set[TopicPartition] = set()
        for tp, code in results.get(entry.producer_id, {}).items():
            error = ErrorCode(code)
            if error == ErrorCode.none or error in _SKIP:
                if tp in entry.metadata.topic_partitions:
                    entry.metadata.remove_partition(tp)
            elif error in _RETRY:
                _log.info(
                    "%s: marker for %s refused with %s; sending it again",
                    entry.transactional_id,
                    tp,
                    error.name,
                )
                retry.add(tp)
            else:
                level = logging.INFO if error in _FENCED else logging.ERROR
                _log.log(
                    level,
                    "%s: marker for %s refused with %s; not sending the rest",
                    entry.transactional_id,
                    tp,
                    error.name,
                )
                self._drop(entry)
                return
        if retry:
            self._retry_later(entry, retry)
        else:
            self._maybe_write_completion(entry)

    def _drop(self, entry: PendingCompleteTxn) -> None:
        if self._pending.get(entry.transactional_id) is entry:
            del self._pending[entry.transactional_id]

    def _maybe_write_completion(self, entry: PendingCompleteTxn) -> None:
        if self._pending.get(entry.transactional_id) is not entry:
            return
        if entry.metadata.topic_partitions:
            return
        self._state.append_transaction_to_log(
            entry.transactional_id,
            entry.coordinator_epoch,
            entry.complete,
            lambda error: self._completion_written(entry, error),
            retry_on_error=lambda error: error == ErrorCode.coordinator_not_available,
        )

    def _completion_written(self, entry: PendingCompleteTxn, error: ErrorCode) -> None:
        if error == ErrorCode.coordinator_not_available and not self._closed:
            self._timer.add(
                CallbackTask(self._retry_backoff_ms, lambda: self._maybe_write_completion(entry))
            )
            return
        if error not in (
            ErrorCode.none,
            ErrorCode.not_coordinator,
            ErrorCode.coordinator_load_in_progress,
        ):
            _log.error(
                "%s: writing %s failed with %s",
                entry.transactional_id,
                entry.complete.txn_state.state_name,
                error.name,
            )
        self._drop(entry)

    # -- remote brokers -----------------------------------------------------------

    def _enqueue(self, broker_id: int, entry: PendingCompleteTxn, marker: TxnMarker) -> None:
        if self._transport is None:
            _log.error("%s: no transport to broker %d", entry.transactional_id, broker_id)
            self._retry_later(entry, set(marker.partitions))
            return
        self._queues.setdefault(broker_id, []).append((entry, marker))
        if broker_id not in self._senders:
            self._senders[broker_id] = asyncio.get_running_loop().create_task(
                self._send_loop(broker_id, self._transport),
                name=f"txn-markers-{broker_id}",
            )

    async def _send_loop(self, broker_id: int, transport: MarkerTransport) -> None:
        try:
            while self._queues.get(broker_id) and not self._closed:
                batch = self._queues.pop(broker_id)
                try:
                    results = await transport.write_txn_markers(
                        broker_id, [marker for _, marker in batch]
                    )
                except Exception as exc:
                    # A lost connection is routine; anything else (an answer that does
                    # not decode) is a bug to see. Either way the markers are still owed,
                    # and this sender must not die with them.
                    routine = isinstance(exc, _CONNECTION_ERRORS)
                    _log.log(
                        logging.INFO if routine else logging.ERROR,
                        "WriteTxnMarkers to broker %d failed: %r; retrying",
                        broker_id,
                        exc,
                        exc_info=not routine,
                    )
                    for entry, marker in batch:
                        self._retry_later(entry, set(marker.partitions))
                    continue
                for entry, marker in batch:
                    answer = results.get(marker.producer_id, {})
                    self._on_results(
                        entry,
                        {
                            marker.producer_id: {
                                # A partition the answer left out is asked again.
                                tp: answer.get(tp, ErrorCode.request_timed_out)
                                for tp in marker.partitions
                            }
                        },
                    )
        finally:
            self._senders.pop(broker_id, None)

    def remove_markers_for_partition(self, partition: int) -> None:
        """Stop sending for the transactions of a ``__transaction_state`` partition."""
        for transactional_id, entry in list(self._pending.items()):
            if self._state.partition_for(transactional_id) == partition:
                self._drop(entry)

    async def close(self) -> None:
        """Stop every sender (shutdown)."""
        self._closed = True
        self._pending.clear()
        self._queues.clear()
        senders = list(self._senders.values())
        for task in senders:
            task.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
        if self._transport is not None:
            await self._transport.close()
