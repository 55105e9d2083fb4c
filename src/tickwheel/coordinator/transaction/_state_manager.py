"""``TransactionStateManager``: the cached transactional ids and ``__transaction_state``.

One cache entry per ``__transaction_state`` partition this broker leads, with the
partition's coordinator epoch (its leader epoch when this broker was elected); an id
lives in partition ``abs(hash(id)) % partitions`` (Java's ``String.hashCode``, as
every Kafka broker and client computes it). As Kafka's ``TransactionStateManager``:

- ``load_partition`` (on election) reads the partition from its log start to its log
  **end** (not the high watermark: a new leader's HW may lag a PrepareCommit it
  holds); the last value of an id wins, a tombstone removes it. Kafka loads on a
  scheduler thread and answers COORDINATOR_LOAD_IN_PROGRESS meanwhile; here the load
  runs on the loop in one go, so no request sees a partition half loaded. It returns
  the transactions caught in PrepareCommit/PrepareAbort, whose markers the
  coordinator sends again, and arms the timers of what it loaded.
- ``unload_partition`` (on resignation) drops the entry and cancels its timers.
- ``append_transaction_to_log`` writes a prepared transition with acks=all through
  ``ReplicaManager.append_records`` (internal topic, ``AppendOrigin.COORDINATOR``),
  maps the partition's error to the coordinator's (Kafka's table), completes the
  transition on success (if this broker is still the coordinator at the same epoch),
  forgets it on failure (unless the caller retries that error), then calls back.

Concurrency: event-loop thread only. The append's callback may run inside the call
(one node, acks=all completes on its first check); every caller prepares its
transition completely before appending and holds nothing the callback could need.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.coordinator._errors import coordinator_append_error
from tickwheel.coordinator._hashing import java_abs, java_string_hash
from tickwheel.coordinator._state_log import read_to_end
from tickwheel.coordinator.transaction._config import TransactionConfig
from tickwheel.coordinator.transaction._log import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogError,
    build_record_batch,
    decode_key,
    decode_value,
    encode_value,
)
from tickwheel.coordinator.transaction._metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from tickwheel.coordinator.transaction._timeouts import TxnTimeouts
from tickwheel.log import AppendOrigin
from tickwheel.replica import ACKS_ALL, ProducePartitionResult, ReplicaManager, TopicPartition

_log = logging.getLogger(__name__)

AppendCallback = Callable[[ErrorCode], None]


@dataclass(slots=True)
class TxnCacheEntry:
    """The ids of one led ``__transaction_state`` partition, at its coordinator epoch."""

    coordinator_epoch: int
    metadata: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PendingCompletion:
    """A loaded transaction in PrepareCommit/PrepareAbort whose markers must be sent."""

    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    complete: TxnTransitMetadata


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """One entry of ListTransactions."""

    transactional_id: str
    producer_id: int
    state: TransactionState


def _never_retry(_error: ErrorCode) -> bool:
    return False


class TransactionStateManager:
    """The transactional ids of the ``__transaction_state`` partitions led here."""

    def __init__(
        self,
        config: TransactionConfig,
        replica_manager: ReplicaManager,
        timeouts: TxnTimeouts,
        *,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.partition_count = config.transaction_state_log_num_partitions
        self._replica_manager = replica_manager
        self.timeouts = timeouts
        self._clock_ms = clock_ms
        self._cache: dict[int, TxnCacheEntry] = {}

    # -- lookups ------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id``."""
        return java_abs(java_string_hash(transactional_id)) % self.partition_count

    def tp_for(self, transactional_id: str) -> TopicPartition:
        """The ``__transaction_state`` partition of ``transactional_id``, named."""
        return TopicPartition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))

    @property
    def owned_partitions(self) -> frozenset[int]:
        """The partitions whose ids are cached here."""
        return frozenset(self._cache)

    def coordinator_epoch(self, partition: int) -> int | None:
        """The coordinator epoch of a loaded partition."""
        entry = self._cache.get(partition)
        return None if entry is None else entry.coordinator_epoch

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        """Kafka's bound: ``0 < timeout <= transaction.max.timeout.ms``."""
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    def get_transaction_state(
        self, transactional_id: str
    ) -> ErrorCode | tuple[int, TransactionMetadata | None]:
        """The id's coordinator epoch and metadata (None: unknown id), or NOT_COORDINATOR."""
        entry = self._cache.get(self.partition_for(transactional_id))
        if entry is None:
            return ErrorCode.not_coordinator
        return entry.coordinator_epoch, entry.metadata.get(transactional_id)

    def put_if_absent(
        self, metadata: TransactionMetadata
    ) -> ErrorCode | tuple[int, TransactionMetadata]:
        """Cache ``metadata`` unless its id is already there; the cached one wins."""
        entry = self._cache.get(self.partition_for(metadata.transactional_id))
        if entry is None:
            return ErrorCode.not_coordinator
        cached = entry.metadata.setdefault(metadata.transactional_id, metadata)
        return entry.coordinator_epoch, cached

    def all_metadata(self) -> Iterable[TransactionMetadata]:
        """Every cached id."""
        for entry in self._cache.values():
            yield from entry.metadata.values()

    def remove_if_same(
        self, transactional_id: str, coordinator_epoch: int, metadata: TransactionMetadata
    ) -> None:
        """Drop an expired id if the cache still holds this object at that epoch."""
        entry = self._cache.get(self.partition_for(transactional_id))
        if (
            entry is not None
            and entry.coordinator_epoch == coordinator_epoch
            and entry.metadata.get(transactional_id) is metadata
        ):
            del entry.metadata[transactional_id]
            self.timeouts.cancel_all([transactional_id])

    def list_transactions(
        self, producer_ids: frozenset[int], states: frozenset[TransactionState], duration_ms: int
    ) -> list[ListedTransaction]:
        """ListTransactions over this broker's partitions; Dead ids are left out."""
        now = self._clock_ms()
        listed = []
        for metadata in self.all_metadata():
            if metadata.state is TransactionState.DEAD:
                continue
            if producer_ids and metadata.producer_id not in producer_ids:
                continue
            if states and metadata.state not in states:
                continue
            if duration_ms >= 0 and now - metadata.txn_start_timestamp <= duration_ms:
                continue
            listed.append(
                ListedTransaction(metadata.transactional_id, metadata.producer_id, metadata.state)
            )
        return listed

    # -- appends ------------------------------------------------------------------

    def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        callback: AppendCallback,
        *,
        retry_on_error: Callable[[ErrorCode], bool] = _never_retry,
    ) -> None:
        """Write ``transit`` to the id's partition; complete it there; then call back."""
        tp = self.tp_for(transactional_id)
        if self.coordinator_epoch(tp.partition) != coordinator_epoch:
            self._abandon(transactional_id, coordinator_epoch)
            callback(ErrorCode.not_coordinator)
            return
        batch = build_record_batch(transactional_id, encode_value(transit), self._clock_ms())
        self._append(
            tp,
            batch,
            transit.txn_timeout_ms,
            lambda error: self._appended(
                transactional_id, coordinator_epoch, transit, error, callback, retry_on_error
            ),
        )

    def append_tombstone(
        self, transactional_id: str, coordinator_epoch: int, callback: AppendCallback
    ) -> None:
        """Write the id's tombstone (transactional.id.expiration.ms passed)."""
        tp = self.tp_for(transactional_id)
        batch = build_record_batch(transactional_id, None, self._clock_ms())
        self._append(tp, batch, self.config.request_timeout_ms, callback)

    def _append(
        self, tp: TopicPartition, batch: bytes, timeout_ms: int, done: AppendCallback
    ) -> None:
        def appended(results: Any) -> None:
            result: ProducePartitionResult = results[tp]
            done(coordinator_append_error(ErrorCode(result.error_code)))

        self._replica_manager.append_records(
            timeout_ms,
            ACKS_ALL,
            {tp: batch},
            appended,
            internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )

    def _appended(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        error: ErrorCode,
        callback: AppendCallback,
        retry_on_error: Callable[[ErrorCode], bool],
    ) -> None:
        state = self.get_transaction_state(transactional_id)
        if error == ErrorCode.none:
            if isinstance(state, ErrorCode):
                error = state
            else:
                epoch, metadata = state
                if metadata is None or epoch != coordinator_epoch:
                    error = ErrorCode.not_coordinator
                else:
                    previous = metadata.state
                    metadata.complete_transition_to(transit)
                    self.timeouts.on_transition(metadata, previous, self._clock_ms())
        elif not retry_on_error(error):
            self._abandon(transactional_id, coordinator_epoch)
        if error != ErrorCode.none:
            _log.info(
                "appending %s of transactional id %s to %s failed: %s",
                transit.txn_state.state_name,
                transactional_id,
                TRANSACTION_STATE_TOPIC,
                error.name,
            )
        callback(error)

    def _abandon(self, transactional_id: str, coordinator_epoch: int) -> None:
        state = self.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return
        epoch, metadata = state
        if metadata is not None and epoch == coordinator_epoch:
            metadata.abandon_pending()

    # -- loading ------------------------------------------------------------------

    def load_partition(self, partition: int, coordinator_epoch: int) -> list[PendingCompletion]:
        """Cache the ids of ``partition`` (just elected); what needs markers again.

        A partition not hosted here (yet) loads as empty.
        """
        self.unload_partition(partition)
        loaded: dict[str, TransactionMetadata] = {}
        hosted = self._replica_manager.get_partition(
            TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        )
        if hosted is not None:
            for _offset, key, value in read_to_end(
                hosted.log, self.config.transaction_state_log_load_buffer_size
            ):
                try:
                    transactional_id = decode_key(key)
                except TransactionLogError as exc:
                    _log.error(
                        "%s-%d: bad key skipped: %s", TRANSACTION_STATE_TOPIC, partition, exc
                    )
                    continue
                if transactional_id is None:
                    _log.warning(
                        "%s-%d: unknown key version skipped", TRANSACTION_STATE_TOPIC, partition
                    )
                    continue
                if value is None:
                    loaded.pop(transactional_id, None)
                    continue
                try:
                    decoded = decode_value(value)
                except (ValueError, struct.error) as exc:
                    # Kafka fails the whole load; one bad record should not take every
                    # other id of the partition with it.
                    _log.error(
                        "%s-%d: bad value of %s skipped: %s",
                        TRANSACTION_STATE_TOPIC,
                        partition,
                        transactional_id,
                        exc,
                    )
                    continue
                loaded[transactional_id] = TransactionMetadata(
                    transactional_id=transactional_id,
                    producer_id=decoded.producer_id,
                    previous_producer_id=decoded.previous_producer_id,
                    next_producer_id=decoded.next_producer_id,
                    producer_epoch=decoded.producer_epoch,
                    last_producer_epoch=NO_PRODUCER_EPOCH,
                    txn_timeout_ms=decoded.txn_timeout_ms,
                    state=decoded.state,
                    topic_partitions=set(decoded.topic_partitions),
                    txn_start_timestamp=decoded.txn_start_timestamp,
                    txn_last_update_timestamp=decoded.txn_last_update_timestamp,
                    client_transaction_version=decoded.client_transaction_version,
                )
        self._cache[partition] = TxnCacheEntry(coordinator_epoch, loaded)
        now = self._clock_ms()
        pending = []
        for metadata in loaded.values():
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                pending.append(
                    PendingCompletion(
                        metadata.transactional_id,
                        coordinator_epoch,
                        metadata,
                        metadata.prepare_complete(now),
                    )
                )
            self.timeouts.on_loaded(metadata, now)
        _log.info(
            "loaded %d transactional ids of %s-%d at coordinator epoch %d",
            len(loaded),
            TRANSACTION_STATE_TOPIC,
            partition,
            coordinator_epoch,
        )
        return pending

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> list[str]:
        """Forget ``partition``'s ids (resigned) and their timers; the ids dropped."""
        entry = self._cache.get(partition)
        if entry is None:
            return []
        if coordinator_epoch is not None and entry.coordinator_epoch > coordinator_epoch:
            return []
        del self._cache[partition]
        self.timeouts.cancel_all(entry.metadata)
        return list(entry.metadata)

    def unload_all(self) -> None:
        """Forget every partition (shutdown)."""
        for partition in list(self._cache):
            self.unload_partition(partition)
