"""The groups this broker coordinates, and their state in ``__consumer_offsets``.

Kafka's GroupMetadataManager: it knows which ``__consumer_offsets`` partitions this broker
leads (the groups it coordinates), keeps each group's committed offsets in memory, writes
every commit and every completed generation to the topic through an ``OffsetsLog``, and
rebuilds the groups of a partition by reading it from the start when this broker becomes
its leader. A group comes back Empty with its offsets, or Stable with the members and
assignments of its last generation (they must heartbeat within their session timeout, or
they are expired as usual).

Offsets reach the in-memory cache only once their append is committed, so OffsetFetch
never returns an offset that a restart could lose. A record that does not decode while
loading is logged and skipped, so one bad record costs at most what it held, never the
broker's start.

Transactional offsets (TxnOffsetCommit) are appended in a transactional batch with the
producer's id and epoch and wait in their group, per producer, for the transaction's
end: the marker's append on this partition calls ``handle_txn_completion``, which
commits or drops them in every group of that producer the partition holds (the manager
remembers them in ``open_groups_for_producer``, Kafka's ``openGroupsForProducer``).
Loading replays the same: a transactional offset record goes to its producer's pending
offsets, a COMMIT marker moves them into the loaded offsets (each only over an offset
written before it), an ABORT marker drops them, and what no marker has ended yet is
still pending in the loaded group. OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for a partition with a commit in flight or pending in a
transaction (Kafka's ``getOffsets``).

Records of the modern group types (key version 3 and up: consumer-protocol groups) are
not this manager's: loading collects them in log order and hands them, with their
partition, to ``other_records_listener`` before any classic group is published.

Removing state is Kafka's cleanupGroupMetadata, shared by offset expiry, OffsetDelete
and DeleteGroups: under each group's lock a selector removes offsets from the cache;
a group left Empty with no offsets (committed or pending) becomes Dead and is forgotten;
then tombstones are appended for what went, the group's own only if it ever reached a
generation (a group that only stored offsets has no group record to delete). Reloading
the partition then finds the tombstones, so nothing removed comes back. As in Kafka the
tombstones' append is not waited for: a lost one brings an offset or a group back at the
next load, and the next cleanup removes it again.

Concurrency contract: the maps of groups and of owned/loading partitions are guarded by
one manager lock, and ``open_groups_for_producer`` by another; each is held only for
map reads and writes, never while taking a group lock or calling out.
``handle_txn_completion`` must be called holding no group lock: it takes each group's
lock in turn. ``store_group``/``store_offsets`` must be called with the group's lock
held; they defer the append to the outermost release of that lock, and their callbacks
run under the group lock on the thread that completes the append, with the response
itself deferred again past the lock. ``cleanup_group_metadata`` must be called holding
no group lock: it takes each group's lock in turn, and appends after releasing it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator._errors import CorruptOffsetsRecordError
from tickwheel.coordinator._hashing import partition_for
from tickwheel.coordinator.group._config import GroupConfig
from tickwheel.coordinator.group._group import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    TopicPartition,
)
from tickwheel.coordinator.group._offsets_log import OFFSETS_TOPIC, OffsetsLog
from tickwheel.coordinator.group._records import (
    TXN_OFFSET_COMMIT_SEQUENCE,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetsBatch,
    OffsetValue,
    OtherRecord,
    StoredMember,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    read_record_batches,
)
from tickwheel.record import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlType

_log = logging.getLogger(__name__)

OffsetsCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
OffsetsSelector = Callable[[GroupMetadata], Mapping[TopicPartition, OffsetValue]]
"""Removes some of a group's offsets under its lock and returns them (cleanup_group_metadata)."""

# Tombstones go in batches of at most this many bytes of records, well below the 1 MiB
# that message.max.bytes allows by default, however many groups one cleanup removes.
_TOMBSTONE_BATCH_BYTES = 512 * 1024
# The most a tombstone adds to its key in a v2 batch: varints for its length, timestamp
# and offset deltas, key length, null value and header count, and its attributes byte.
_TOMBSTONE_OVERHEAD_BYTES = 16

# How an append error reads to a client committing offsets (Kafka's GroupMetadataManager).
_APPEND_ERROR_FOR_CLIENT: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the timestamps Kafka writes in commit records."""
    return time.time_ns() // 1_000_000


def client_error(append_error: ErrorCode) -> ErrorCode:
    """The error a client sees for a failed append to ``__consumer_offsets``."""
    return _APPEND_ERROR_FOR_CLIENT.get(append_error, append_error)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """A committed offset as OffsetFetch returns it (offset -1: nothing committed)."""

    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


_NO_OFFSET = FetchedOffset(-1, -1, "")
_UNSTABLE_OFFSET = FetchedOffset(-1, -1, "", ErrorCode.unstable_offset_commit)

GroupOffsets = dict[TopicPartition, CommitRecordMetadataAndOffset]


class _LoadedOffsets:
    """What loading one partition has read so far: offsets, pending transactional
    offsets per producer, and group records (Kafka's ``doLoadGroupsAndOffsets`` state)."""

    def __init__(self) -> None:
        self.offsets: dict[str, GroupOffsets] = {}
        self.pending: dict[int, dict[str, GroupOffsets]] = {}  # producer -> group -> offsets
        self.stored: dict[str, GroupValue | None] = {}
        self.others: list[OtherRecord] = []

    def add_batch(self, batch: OffsetsBatch) -> None:
        if not batch.is_control:
            self._add_records(batch)
            self.others.extend(batch.others)
        elif batch.marker is not None:  # a control batch without a record ends nothing
            self._end_transaction(batch.producer_id, batch.marker.control_type)

    def _end_transaction(self, producer_id: int, control_type: ControlType) -> None:
        ended = self.pending.pop(producer_id, {})
        if control_type is not ControlType.COMMIT:
            return
        for group_id, offsets in ended.items():
            loaded = self.offsets.setdefault(group_id, {})
            for tp, offset in offsets.items():
                current = loaded.get(tp)
                if current is None or current.older_than(offset):
                    loaded[tp] = offset

    def _add_records(self, batch: OffsetsBatch) -> None:
        for record in batch.records:
            key = record.key
            if isinstance(key, OffsetKey):
                if batch.is_transactional:
                    by_group = self.pending.setdefault(batch.producer_id, {})
                    group_offsets = by_group.setdefault(key.group_id, {})
                else:
                    group_offsets = self.offsets.setdefault(key.group_id, {})
                tp = (key.topic, key.partition)
                if isinstance(record.value, OffsetValue):
                    offset = CommitRecordMetadataAndOffset(batch.base_offset, record.value)
                    group_offsets[tp] = offset
                else:
                    group_offsets.pop(tp, None)
            else:
                value = record.value
                self.stored[key.group_id] = value if isinstance(value, GroupValue) else None

    def pending_by_group(self) -> dict[str, dict[int, GroupOffsets]]:
        """The transactional offsets still pending, per group and producer."""
        by_group: dict[str, dict[int, GroupOffsets]] = {}
        for producer_id, groups in self.pending.items():
            for group_id, offsets in groups.items():
                by_group.setdefault(group_id, {})[producer_id] = dict(offsets)
        return by_group


class GroupMetadataManager:
    """Groups by id, ownership of ``__consumer_offsets`` partitions, loading and storing."""

    def __init__(
        self,
        config: GroupConfig,
        offsets_log: OffsetsLog,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self._offsets_log = offsets_log
        self.clock_ms = clock_ms
        self._lock = threading.Lock()
        self._groups: dict[str, GroupMetadata] = {}
        self._owned_partitions: set[int] = set()
        self._loading_partitions: set[int] = set()
        self._producers_lock = threading.Lock()
        # Producer id -> the groups where it has transactional offsets pending.
        self._open_groups_for_producer: dict[int, set[str]] = {}
        # Told (partition, records) of the modern group types while a partition loads.
        self.other_records_listener: Callable[[int, Sequence[OtherRecord]], None] | None = None

    # --- ownership -----------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id``."""
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        """True if this broker coordinates ``group_id``."""
        with self._lock:
            return self.partition_for(group_id) in self._owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        """True while ``group_id``'s partition is being loaded."""
        with self._lock:
            return self.partition_for(group_id) in self._loading_partitions

    @property
    def is_loading(self) -> bool:
        """True while any partition is being loaded."""
        with self._lock:
            return bool(self._loading_partitions)

    @property
    def owned_partitions(self) -> frozenset[int]:
        """The ``__consumer_offsets`` partitions this broker coordinates."""
        with self._lock:
            return frozenset(self._owned_partitions)

    # --- the group map ---------------------------------------------------------------

    def get_group(self, group_id: str) -> GroupMetadata | None:
        """The group, if this broker has it."""
        with self._lock:
            return self._groups.get(group_id)

    def get_or_add_group(self, group_id: str) -> GroupMetadata:
        """The group, created Empty if unknown."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                group = GroupMetadata(group_id, now_ms=self.clock_ms())
                self._groups[group_id] = group
            return group

    def current_groups(self) -> list[GroupMetadata]:
        """Every group this broker has."""
        with self._lock:
            return list(self._groups.values())

    def remove_group(self, group: GroupMetadata) -> bool:
        """Forget ``group`` (it must already be Dead); False if it was already forgotten."""
        with self._lock:
            if self._groups.get(group.group_id) is not group:
                return False
            del self._groups[group.group_id]
            return True

    # --- loading and unloading --------------------------------------------------------

    def load_partition(
        self, partition: int, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        """Become coordinator of ``partition``: rebuild its groups from the log."""
        with self._lock:
            if partition in self._owned_partitions:
                return
            self._loading_partitions.add(partition)
        try:
            state = _LoadedOffsets()

            def skip(offset: int, error: CorruptOffsetsRecordError) -> None:
                _log.error(
                    "skipping undecodable __consumer_offsets-%d record at offset %d: %s",
                    partition,
                    offset,
                    error,
                )

            for chunk in self._offsets_log.read(partition):
                for batch in read_record_batches(chunk, on_undecodable=skip):
                    state.add_batch(batch)
            if self.other_records_listener is not None:
                self.other_records_listener(partition, state.others)
            pending = state.pending_by_group()
            for group_id, by_producer in pending.items():
                for producer_id in by_producer:
                    self._add_producer_group(producer_id, group_id)
            loaded = [
                self._rebuild(
                    group_id,
                    state.stored.get(group_id),
                    state.offsets.get(group_id, {}),
                    pending.get(group_id, {}),
                )
                for group_id in {*state.offsets, *state.stored, *pending}
                if state.stored.get(group_id) is not None
                or state.offsets.get(group_id)
                or pending.get(group_id)
            ]
            with self._lock:
                for group in loaded:
                    self._groups[group.group_id] = group
                self._owned_partitions.add(partition)
        finally:
            with self._lock:
                self._loading_partitions.discard(partition)
        for group in loaded:
            on_group_loaded(group)

    def _rebuild(
        self,
        group_id: str,
        value: GroupValue | None,
        offsets: GroupOffsets,
        pending_txn_offsets: dict[int, GroupOffsets],
    ) -> GroupMetadata:
        group = GroupMetadata(group_id, now_ms=self.clock_ms())
        group.offsets = offsets
        group.pending_txn_offsets = pending_txn_offsets
        if value is None:
            return group
        group.generation_id = value.generation_id
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol_name
        # An Empty group's offsets expire counting from when it became Empty, not from
        # when this broker loaded it.
        group.state_timestamp_ms = value.current_state_timestamp_ms
        with group.lock:
            for stored_member in value.members:
                protocol = value.protocol_name or ""
                member = MemberMetadata(
                    member_id=stored_member.member_id,
                    group_id=group_id,
                    group_instance_id=stored_member.group_instance_id,
                    client_id=stored_member.client_id,
                    client_host=stored_member.client_host,
                    rebalance_timeout_ms=stored_member.rebalance_timeout_ms,
                    session_timeout_ms=stored_member.session_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=((protocol, stored_member.subscription),),
                    assignment=stored_member.assignment,
                )
                group.add(member, None)
            group.leader_id = (
                value.leader_id if value.leader_id in group.members else group.leader_id
            )
            if group.members:
                group.state = GroupState.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def unload_partition(
        self, partition: int, on_group_unloaded: Callable[[GroupMetadata], None]
    ) -> None:
        """Stop coordinating ``partition``: its groups become Dead and are forgotten."""
        with self._lock:
            self._owned_partitions.discard(partition)
            leaving = [
                g for g in self._groups.values() if self.partition_for(g.group_id) == partition
            ]
            for group in leaving:
                del self._groups[group.group_id]
        for group in leaving:
            self._remove_group_from_all_producers(group.group_id)
            on_group_unloaded(group)

    # --- storing -------------------------------------------------------------------------

    def _append(
        self,
        group: GroupMetadata,
        batch: bytes,
        on_appended: Callable[[ErrorCode, int], None],
    ) -> None:
        partition = self.partition_for(group.group_id)
        group.lock.defer(lambda: self._offsets_log.append(partition, batch, on_appended))

    def store_group(
        self,
        group: GroupMetadata,
        assignment: Mapping[str, bytes],
        callback: Callable[[ErrorCode], None],
    ) -> None:
        """Write the group's generation with ``assignment``; ``callback(error)`` under its lock."""
        protocol = group.protocol_name
        members = tuple(
            StoredMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata_for(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation_id=group.generation_id,
            protocol_name=protocol,
            leader_id=group.leader_id,
            current_state_timestamp_ms=group.state_timestamp_ms,
            members=members,
        )
        entry = (encode_group_key(GroupKey(group.group_id)), encode_group_value(value))

        def appended(error: ErrorCode, _base_offset: int) -> None:
            with group.lock:
                callback(client_error(error))

        self._append(group, build_batch([entry], self.clock_ms()), appended)

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, OffsetValue],
        callback: OffsetsCallback,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        """Write committed offsets; cache them once committed; answer ``callback`` past the lock.

        With a ``producer_id`` (TxnOffsetCommit) they are written in a transactional batch
        of that producer and kept pending until its transaction ends.
        """
        max_bytes = self.config.offset_metadata_max_bytes
        too_large = {
            tp for tp, value in offsets.items() if len(value.metadata.encode()) > max_bytes
        }
        valid = {tp: value for tp, value in offsets.items() if tp not in too_large}
        errors = dict.fromkeys(too_large, ErrorCode.offset_metadata_too_large)
        if not valid:
            group.lock.defer(lambda: callback(errors))
            return
        entries: list[tuple[bytes, bytes | None]] = [
            (
                encode_offset_key(OffsetKey(group.group_id, topic, partition)),
                encode_offset_value(value),
            )
            for (topic, partition), value in valid.items()
        ]
        transactional = producer_id != NO_PRODUCER_ID
        if transactional:
            self._add_producer_group(producer_id, group.group_id)
            group.prepare_txn_offset_commit(producer_id, valid)
            batch = build_batch(
                entries,
                self.clock_ms(),
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=TXN_OFFSET_COMMIT_SEQUENCE,
                transactional=True,
            )
        else:
            group.prepare_offset_commit(valid)
            batch = build_batch(entries, self.clock_ms())

        def appended(error: ErrorCode, base_offset: int) -> None:
            with group.lock:
                succeeded = error is ErrorCode.none
                if not transactional:
                    group.complete_offset_commit(valid, succeeded, base_offset)
                elif group.is_in(GroupState.DEAD):
                    pass  # emigrated or deleted: the marker reaches whoever loads it
                elif succeeded:
                    group.on_txn_offset_commit_append(producer_id, valid, base_offset)
                else:
                    group.fail_pending_txn_offset_commit(producer_id, valid)
                    if not group.has_pending_offset_commits_from_producer(producer_id):
                        self._remove_producer_group(producer_id, group.group_id)
                outcome = client_error(error)
                errors.update(dict.fromkeys(valid, outcome))
                group.lock.defer(lambda: callback(errors))

        self._append(group, batch, appended)

    # --- transactions ------------------------------------------------------------------

    def _add_producer_group(self, producer_id: int, group_id: str) -> None:
        with self._producers_lock:
            self._open_groups_for_producer.setdefault(producer_id, set()).add(group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        with self._producers_lock:
            groups = self._open_groups_for_producer.get(producer_id)
            if groups is None:
                return
            groups.discard(group_id)
            if not groups:
                del self._open_groups_for_producer[producer_id]

    def _remove_group_from_all_producers(self, group_id: str) -> None:
        with self._producers_lock:
            for producer_id, groups in list(self._open_groups_for_producer.items()):
                groups.discard(group_id)
                if not groups:
                    del self._open_groups_for_producer[producer_id]

    def open_groups_for_producer(self, producer_id: int) -> frozenset[str]:
        """The groups where ``producer_id`` has transactional offsets pending."""
        with self._producers_lock:
            return frozenset(self._open_groups_for_producer.get(producer_id, ()))

    def handle_txn_completion(
        self, producer_id: int, completed_partitions: Iterable[int], is_commit: bool
    ) -> None:
        """A transaction marker of ``producer_id`` was appended to ``completed_partitions``:
        commit (or drop) its pending offsets in their groups. Call holding no group lock."""
        partitions = set(completed_partitions)
        with self._producers_lock:
            groups = [
                group_id
                for group_id in self._open_groups_for_producer.get(producer_id, ())
                if self.partition_for(group_id) in partitions
            ]
        for group_id in groups:
            group = self.get_group(group_id)
            if group is None:
                _log.info(
                    "group %s is gone (moved away or deleted) after producer %d's marker "
                    "was written; whoever loads it reads the outcome from the log",
                    group_id,
                    producer_id,
                )
                self._remove_producer_group(producer_id, group_id)
                continue
            with group.lock:
                if not group.is_in(GroupState.DEAD):
                    group.complete_pending_txn_offset_commit(producer_id, is_commit)
                    self._remove_producer_group(producer_id, group_id)

    # --- removing ------------------------------------------------------------------------

    def cleanup_group_metadata(
        self, groups: Iterable[GroupMetadata], selector: OffsetsSelector
    ) -> int:
        """Remove the offsets ``selector`` picks from each group, and the groups left Empty
        without offsets; append their tombstones. Returns how many offsets were removed.

        Call holding no group lock (see the module docstring).
        """
        tombstones: dict[int, list[bytes]] = {}
        offsets_removed = 0
        groups_removed = 0
        for group in groups:
            with group.lock:
                removed = selector(group)
                if group.is_in(GroupState.EMPTY) and not group.has_offsets:
                    _log.debug(
                        "group %s transitioned to Dead in generation %d",
                        group.group_id,
                        group.generation_id,
                    )
                    group.transition_to(GroupState.DEAD, self.clock_ms())
                is_dead = group.is_in(GroupState.DEAD)
                generation_id = group.generation_id
            keys = [
                encode_offset_key(OffsetKey(group.group_id, topic, partition))
                for topic, partition in removed
            ]
            if is_dead and self.remove_group(group):
                groups_removed += 1
                if generation_id > 0:
                    keys.append(encode_group_key(GroupKey(group.group_id)))
            if keys:
                tombstones.setdefault(self.partition_for(group.group_id), []).extend(keys)
            offsets_removed += len(removed)
        for partition, keys in tombstones.items():
            self._append_tombstones(partition, keys)
        if groups_removed:
            _log.info("removed %d dead groups", groups_removed)
        return offsets_removed

    def _append_tombstones(self, partition: int, keys: list[bytes]) -> None:
        def appended(error: ErrorCode, _base_offset: int) -> None:
            if error is not ErrorCode.none:
                _log.warning(
                    "could not append tombstones to %s-%d: %s",
                    OFFSETS_TOPIC,
                    partition,
                    error.name,
                )

        timestamp_ms = self.clock_ms()
        batch: list[tuple[bytes, bytes | None]] = []
        batch_bytes = 0
        for key in keys:
            record_bytes = len(key) + _TOMBSTONE_OVERHEAD_BYTES
            if batch and batch_bytes + record_bytes > _TOMBSTONE_BATCH_BYTES:
                self._offsets_log.append(partition, build_batch(batch, timestamp_ms), appended)
                batch, batch_bytes = [], 0
            batch.append((key, None))
            batch_bytes += record_bytes
        if batch:
            self._offsets_log.append(partition, build_batch(batch, timestamp_ms), appended)

    # --- reading --------------------------------------------------------------------------

    def get_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        *,
        require_stable: bool = False,
    ) -> dict[TopicPartition, FetchedOffset]:
        """Committed offsets of ``partitions`` (all the group has when None).

        With ``require_stable``, a partition whose commit is in flight or pending in a
        transaction answers UNSTABLE_OFFSET_COMMIT instead (the client retries).
        """
        group = self.get_group(group_id)
        if group is None:
            return {} if partitions is None else dict.fromkeys(partitions, _NO_OFFSET)
        result: dict[TopicPartition, FetchedOffset] = {}
        with group.lock:
            wanted = list(group.offsets) if partitions is None else partitions
            for tp in wanted:
                value = group.committed_offset(tp)
                if require_stable and group.has_pending_offset_commits(tp):
                    result[tp] = _UNSTABLE_OFFSET
                elif value is None:
                    result[tp] = _NO_OFFSET
                else:
                    result[tp] = FetchedOffset(value.offset, value.leader_epoch, value.metadata)
        return result
