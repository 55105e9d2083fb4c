"""``ShareCoordinator``: the share-partition states of the ``__share_group_state``
partitions this broker leads.

Kafka's share coordinator (KIP-932) keeps where each share group stands on each topic
partition -- the share-partition start offset, the in-flight batches that are
acknowledged, archived or available again, and their delivery counts -- so that a
share-partition's leader, after a restart or a leadership move, neither redelivers an
accepted record nor forgets a delivery count. A share-partition ``group:topicId:partition``
lives in ``__share_group_state`` partition ``abs(hash(key)) % partitions`` (Java's
``String.hashCode`` of that text), and the leader of that partition is its coordinator.

As Kafka's ``ShareCoordinatorShard``:

- ``on_elected`` loads a partition from its log start to its log end (the last snapshot
  of a key wins; a tombstone removes it) and ``on_resigned`` drops it; a request for a
  key of a partition not loaded here is answered NOT_COORDINATOR.
- ``write_state`` appends a snapshot of the whole state with acks=all and answers once
  it is committed: a state acknowledged to a client survives the loss of this broker.
  It is fenced when its leader epoch is older than the stored one (an old leader of the
  data partition: FENCED_LEADER_EPOCH) or its state epoch is (the state was reset or
  deleted by an administrator since: FENCED_STATE_EPOCH). Kafka appends deltas
  (ShareUpdate) between snapshots; a share-partition here always sends its whole state,
  bounded by ``group.share.partition.max.record.locks``, so every record is a snapshot and
  the topic's compaction keeps one record per share-partition.
- ``initialize_state`` writes a state with no batches at a new state epoch (Kafka's
  InitializeShareGroupState: the group coordinator starts a share-partition, or an
  administrator moves its start offset); ``delete_state`` writes the tombstone.
- ``read_state`` answers the committed state (None: never initialized); an
  administrator's read (ReadShareGroupStateSummary) is the same without a leader epoch.

Each state is applied to the cache when its append completes, and only if it is newer
(by log offset) than what the cache holds, so two writes of one key in flight cannot
leave the older one behind; a write is fenced against the newest state appended, even
one not yet committed.

Concurrency contract: event-loop thread only, like the ReplicaManager whose
``append_records`` it calls; awaiting an append yields the loop, and a partition may be
resigned meanwhile (the answer is then NOT_COORDINATOR).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tickwheel.coordinator._errors import coordinator_append_error
from tickwheel.coordinator._hashing import java_abs, java_string_hash
from tickwheel.coordinator._state_log import StateLogError, read_to_end
from tickwheel.coordinator.share_state._config import ShareCoordinatorConfig
from tickwheel.coordinator.share_state._records import (
    SHARE_GROUP_STATE_TOPIC,
    ShareSnapshot,
    ShareStateRecordError,
    build_record_batch,
    decode_key,
    decode_value,
    next_snapshot_epoch,
)
from tickwheel.log import AppendOrigin
from tickwheel.protocol import encode_topic_id
from tickwheel.replica import ACKS_ALL, ProducePartitionResult, ReplicaManager, TopicPartition
from tickwheel.share_delivery import ShareGroupState, SharePartitionKey

_log = logging.getLogger(__name__)

NO_LEADER_EPOCH = -1
"""A request's leader epoch when it does not know one (an administrator's)."""
MAX_STATE_SPAN_OFFSETS = 100_000
"""The most offsets a state's batches may span from its start offset: ten times the
largest in-flight window a share-partition may have
(``group.share.partition.max.record.locks`` is at most 10,000). A share-partition is
rebuilt offset by offset from its state, so a wider one, which only a forged
WriteShareGroupState can make, is refused rather than stored."""


def state_error(state: ShareGroupState) -> str | None:
    """Why ``state`` cannot be a share-partition's state, or None if it can."""
    if state.start_offset < 0:
        return f"start offset {state.start_offset} is negative"
    for batch in state.state_batches:
        if not state.start_offset <= batch.first_offset <= batch.last_offset:
            return f"batch {batch.first_offset}..{batch.last_offset} is out of order"
        if batch.last_offset - state.start_offset >= MAX_STATE_SPAN_OFFSETS:
            return f"batch {batch.first_offset}..{batch.last_offset} is too far from the start"
        if batch.delivery_count < 0:
            return f"delivery count {batch.delivery_count} is negative"
    return None


def coordinator_key(key: SharePartitionKey) -> str:
    """The text Kafka hashes to place a share-partition: ``group:topicId:partition``."""
    return f"{key.group_id}:{encode_topic_id(key.topic_id)}:{key.partition}"


def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of ``key``."""
    return java_abs(java_string_hash(coordinator_key(key))) % num_partitions


@dataclass(frozen=True, slots=True)
class StoredState:
    """A share-partition's last committed snapshot and the offset it was written at."""

    offset: int
    snapshot: ShareSnapshot


@dataclass(slots=True)
class _LoadedPartition:
    # The committed state of each share-partition.
    states: dict[SharePartitionKey, StoredState] = field(default_factory=dict)
    # The newest state appended for a share-partition and not committed yet (None: a
    # tombstone), under the token of its append: the next write is checked against it,
    # as Kafka checks writes against its in-memory state, so a write admitted while an
    # administrator's reset was in flight cannot undo the reset.
    pending: dict[SharePartitionKey, tuple[int, ShareSnapshot | None]] = field(default_factory=dict)

    def latest(self, key: SharePartitionKey) -> ShareSnapshot | None:
        """The newest snapshot of ``key``, pending or committed (None: none)."""
        if key in self.pending:
            return self.pending[key][1]
        stored = self.states.get(key)
        return None if stored is None else stored.snapshot


class ShareCoordinator:
    """Share-partition states in the ``__share_group_state`` partitions led here."""

    def __init__(
        self,
        config: ShareCoordinatorConfig,
        replica_manager: ReplicaManager,
        *,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self._replica_manager = replica_manager
        self._clock_ms = clock_ms
        self.partition_count = config.share_coordinator_state_topic_num_partitions
        self._loaded: dict[int, _LoadedPartition] = {}
        self._append_tokens = itertools.count()

    # -- placement and leadership ----------------------------------------------------

    def partition_for(self, key: SharePartitionKey) -> int:
        """The ``__share_group_state`` partition that keeps ``key``."""
        return partition_for(key, self.partition_count)

    @property
    def owned_partitions(self) -> frozenset[int]:
        """The state partitions loaded here."""
        return frozenset(self._loaded)

    def on_elected(self, partition: int) -> None:
        """This broker leads state ``partition`` now: load its share-partitions."""
        loaded = _LoadedPartition()
        hosted = self._replica_manager.get_partition(
            TopicPartition(SHARE_GROUP_STATE_TOPIC, partition)
        )
        if hosted is not None:
            try:
                records = list(
                    read_to_end(hosted.log, self.config.share_coordinator_load_buffer_size)
                )
            except StateLogError as exc:
                # Served empty, every share-partition of it would start over and deliver
                # settled records again: it stays unloaded (NOT_COORDINATOR) instead.
                _log.error("%s-%d: not loaded: %s", SHARE_GROUP_STATE_TOPIC, partition, exc)
                return
            for offset, key_bytes, value in records:
                self._replay(partition, loaded, offset, key_bytes, value)
        self._loaded[partition] = loaded
        _log.info(
            "loaded %d share-partition states from %s-%d",
            len(loaded.states),
            SHARE_GROUP_STATE_TOPIC,
            partition,
        )

    @staticmethod
    def _replay(
        partition: int,
        loaded: _LoadedPartition,
        offset: int,
        key_bytes: bytes,
        value: bytes | None,
    ) -> None:
        try:
            key = decode_key(key_bytes)
            if key is None:
                _log.warning(
                    "%s-%d: a record of an unknown type at offset %d is skipped",
                    SHARE_GROUP_STATE_TOPIC,
                    partition,
                    offset,
                )
                return
            if value is None:
                loaded.states.pop(key, None)
                return
            loaded.states[key] = StoredState(offset, decode_value(value))
        except ShareStateRecordError as exc:
            # Kafka fails the whole load; one bad record should not take every other
            # share-partition of the partition with it.
            _log.error(
                "%s-%d: the record at offset %d is skipped: %s",
                SHARE_GROUP_STATE_TOPIC,
                partition,
                offset,
                exc,
            )

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads state ``partition``: forget its states."""
        self._loaded.pop(partition, None)

    def _states_of(self, key: SharePartitionKey) -> dict[SharePartitionKey, StoredState] | None:
        loaded = self._loaded.get(self.partition_for(key))
        return None if loaded is None else loaded.states

    def _partition_of(self, key: SharePartitionKey) -> _LoadedPartition | None:
        return self._loaded.get(self.partition_for(key))

    # -- reads -----------------------------------------------------------------------

    def read_state(
        self, key: SharePartitionKey, leader_epoch: int = NO_LEADER_EPOCH
    ) -> tuple[ErrorCode, ShareGroupState | None]:
        """The stored state of ``key`` (None: never initialized), or why there is none."""
        states = self._states_of(key)
        if states is None:
            return ErrorCode.not_coordinator, None
        stored = states.get(key)
        if stored is None:
            return ErrorCode.none, None
        state = stored.snapshot.state
        if leader_epoch != NO_LEADER_EPOCH and leader_epoch < state.leader_epoch:
            return ErrorCode.fenced_leader_epoch, None
        return ErrorCode.none, state

    def keys_of_group(self, group_id: str) -> list[SharePartitionKey]:
        """Every share-partition of ``group_id`` whose state is kept here."""
        return [
            key
            for loaded in self._loaded.values()
            for key in loaded.states
            if key.group_id == group_id
        ]

    # -- writes ----------------------------------------------------------------------

    async def write_state(self, key: SharePartitionKey, state: ShareGroupState) -> ErrorCode:
        """Store ``state`` as the whole state of ``key``; NONE once committed, and
        INVALID_REQUEST for a state no share-partition can have (``state_error``)."""
        if state_error(state) is not None:
            return ErrorCode.invalid_request
        loaded = self._partition_of(key)
        if loaded is None:
            return ErrorCode.not_coordinator
        latest = loaded.latest(key)
        if latest is not None:
            current = latest.state
            if state.leader_epoch != NO_LEADER_EPOCH and state.leader_epoch < current.leader_epoch:
                return ErrorCode.fenced_leader_epoch
            if state.state_epoch < current.state_epoch:
                return ErrorCode.fenced_state_epoch
        return await self._append(key, state)

    async def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode:
        """Start ``key`` (again) at ``start_offset`` with no record in flight."""
        if start_offset < 0:
            return ErrorCode.invalid_request
        loaded = self._partition_of(key)
        if loaded is None:
            return ErrorCode.not_coordinator
        latest = loaded.latest(key)
        leader_epoch = NO_LEADER_EPOCH
        if latest is not None:
            if state_epoch <= latest.state.state_epoch:
                return ErrorCode.fenced_state_epoch
            leader_epoch = latest.state.leader_epoch
        return await self._append(key, ShareGroupState(state_epoch, leader_epoch, start_offset, ()))

    async def delete_state(self, key: SharePartitionKey) -> ErrorCode:
        """Remove the state of ``key`` (a tombstone); NONE once committed."""
        loaded = self._partition_of(key)
        if loaded is None:
            return ErrorCode.not_coordinator
        if loaded.latest(key) is None:
            return ErrorCode.none
        return await self._append(key, None)

    async def _append(self, key: SharePartitionKey, state: ShareGroupState | None) -> ErrorCode:
        loaded = self._partition_of(key)
        assert loaded is not None
        snapshot = None
        if state is not None:
            previous = loaded.latest(key)
            previous_epoch = -1 if previous is None else previous.snapshot_epoch
            snapshot = ShareSnapshot(next_snapshot_epoch(previous_epoch), state)
        token = next(self._append_tokens)
        loaded.pending[key] = (token, snapshot)
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, self.partition_for(key))
        done: asyncio.Future[ProducePartitionResult] = asyncio.get_running_loop().create_future()

        def appended(results: Mapping[TopicPartition, ProducePartitionResult]) -> None:
            if not done.done():
                done.set_result(results[tp])

        self._replica_manager.append_records(
            self.config.share_coordinator_write_timeout_ms,
            ACKS_ALL,
            {tp: build_record_batch(key, snapshot, self._clock_ms())},
            appended,
            internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )
        result = await done
        if loaded.pending.get(key, (None, None))[0] == token:
            del loaded.pending[key]
        error = ErrorCode(result.error_code)
        if error is not ErrorCode.none:
            _log.info("writing the share state of %s failed: %s", coordinator_key(key), error.name)
            return coordinator_append_error(error)
        if self._loaded.get(tp.partition) is not loaded:
            return ErrorCode.not_coordinator
        committed = loaded.states.get(key)
        if committed is None or committed.offset < result.base_offset:
            if snapshot is None:
                loaded.states.pop(key, None)
            else:
                loaded.states[key] = StoredState(result.base_offset, snapshot)
        return ErrorCode.none
