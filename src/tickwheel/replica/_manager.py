"""``ReplicaManager``: the partitions this broker hosts, and the purgatories they wake.

The path of a produce and a fetch below the API handlers (DESIGN.md §4):

- ``append_records``: append to each partition's leader log. acks=0/1 answer right
  after the append; acks=all always goes through a ``DelayedProduce`` (one per request,
  one lock for all its partitions), which on one node completes on its first check.
- ``fetch_messages``: read each partition (below the HW for consumers, the LEO for
  followers); answer now when there is enough (≥ ``min_bytes``), an error, or no wait;
  otherwise a ``DelayedFetch`` waits under every partition's key, and reads again when
  it completes. A follower that ``leader_quota`` throttles on a partition reads nothing
  of it (``ReplicationQuota``); what followers get of throttled partitions is recorded.
- ``delete_records``: move log start offsets; a ``DelayedDeleteRecords`` answers once
  the low watermark reaches them.
- ``append_txn_markers``: append transaction markers (WriteTxnMarkers, and the local
  transaction coordinator) with acks=all and COORDINATOR origin; once markers are in,
  ``txn_completion_listener`` (installed by the group coordinator: this package never
  imports a coordinator) is told the partitions, and materialises or drops the
  transaction's offsets on those of ``__consumer_offsets``.

Transactions: read_committed fetches read up to the last stable offset and get the
aborted transactions overlapping what they read. The LSO is the HW while no
transaction is open or unreplicated, and otherwise moves when the HW passes a marker,
the log start jumps or the log is truncated; so the HW wakes above already wake
read_committed fetches, and DeleteRecords wakes fetches too, since a log start move can
move the LSO.

The events that wake them (Kafka's ``tryCompleteDelayedRequests``): an append wakes
fetches on its partition (followers wait for the LEO; checked once the appends of the
loop turn are all in, so that piped produces reach a follower in one answer); a
high-watermark increase wakes produces, fetches and delete-records on it; a follower's
fetch may move the HW; a leadership change, a deleted partition or a failed log
directory wakes everything on it.
Each of those high-watermark and leadership events is also told to
``high_watermark_listener`` (the share-partition manager's ShareFetch purgatory waits on
them too, and this package does not import it).

Storage failures: an I/O error from a log (a full disk, a failing device) takes its
whole log directory offline through the ``LogManager``; every partition in it is
marked offline and answers KAFKA_STORAGE_ERROR from then on, while the partitions of
the other directories go on serving (Kafka's ``handleLogDirFailure``).

Moving a replica's log between this broker's log directories (AlterReplicaLogDirs,
``alter_replica_log_dir``): a task per move runs ``_COPY_PASSES`` copy passes of the
``LogDirMove`` on a worker thread, then swaps the copy in on the loop, between two
appends, and the partition reads and appends to the moved log from then on (waiting
fetches are checked against it). A move gives up when its partition is deleted or goes
offline meanwhile; asking another destination cancels the move under way first.

Three purgatories, named as Kafka's (``Produce``, ``Fetch``, ``DeleteRecords``), each
with its own ``SystemTimer`` from the broker's ``LoopTimers`` (an ``InlineExecutor``,
driven by an ``AsyncioTimerDriver``, or by a ``ManualClock``'s ``advance`` in tests):
no thread exists; completions, expirations and purges all run on the event loop.

Concurrency: everything — handlers, partitions, logs, purgatories, timers — runs on
the one event-loop thread that called ``start``; nothing here may be called from
another thread. The one piece of work sent to a worker thread is a log move's copy
pass, which touches files only (``LogDirMove.copy_changed``), never a log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.log import (
    AppendOrigin,
    LogConfig,
    LogError,
    LogStorageError,
    ProducerStateSummary,
    RecordValidationError,
    VerificationGuard,
    build_end_txn_marker,
    system_clock_ms,
)
from tickwheel.purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from tickwheel.replica._delayed_delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsCallback,
    DeleteRecordsPartitionStatus,
)
from tickwheel.replica._delayed_fetch import DelayedFetch, FetchCallback, FetchPartitionStatus
from tickwheel.replica._delayed_produce import (
    DelayedProduce,
    ProduceCallback,
    ProducePartitionStatus,
)
from tickwheel.replica._log_dir_move import LogDirMove, movable
from tickwheel.replica._log_manager import LogManager, storage_failure
from tickwheel.replica._partition import Partition, PartitionError
from tickwheel.replica._replication_quota import ReplicationQuota
from tickwheel.replica._types import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    DeleteRecordsPartitionResult,
    FetchIsolation,
    FetchParams,
    FetchPartitionResult,
    PartitionFetchInfo,
    ProducePartitionResult,
    TopicPartition,
    TxnMarker,
    TxnMarkerCallback,
    is_internal_topic,
)
from tickwheel.timer import LoopTimers

_log = logging.getLogger(__name__)

_VALID_ACKS = frozenset({ACKS_NONE, ACKS_LEADER, ACKS_ALL})
_LATEST_OFFSET = -1
_NO_OFFSET = -1
_COPY_PASSES = 2
"""Copy passes before a move's swap: the second copies what was appended during the
first, so that the swap's own pass (appends paused) has little left to copy."""


@dataclass(frozen=True, slots=True)
class PurgatoryConfig:
    """Each purgatory's ``*.purgatory.purge.interval.requests``."""

    produce_purge_interval_requests: int = 1000
    fetch_purge_interval_requests: int = 1000
    delete_records_purge_interval_requests: int = 1


def _key(tp: TopicPartition) -> TopicPartitionOperationKey:
    return TopicPartitionOperationKey(tp.topic, tp.partition)


def _refuse_internal_append(tp: TopicPartition) -> ProducePartitionResult:
    return ProducePartitionResult(
        ErrorCode.invalid_topic_exception,
        error_message=f"cannot append to internal topic {tp.topic}",
    )


def _without_records(result: FetchPartitionResult) -> FetchPartitionResult:
    """``result`` with no records, at the same position (a throttled follower read)."""
    data = result.data
    if data is None or data.records.length == 0:
        return result
    empty = dataclasses.replace(data.records, length=0)
    return dataclasses.replace(result, data=dataclasses.replace(data, records=empty))


def refused_records(error: RecordValidationError, log_start_offset: int) -> ProducePartitionResult:
    """A partition's answer when a per-record rule refuses its records: INVALID_RECORD
    with each refused record in ``record_errors`` and Kafka's summary as the message."""
    return ProducePartitionResult(
        error.error_code,
        log_start_offset=log_start_offset,
        error_message=str(error),
        record_errors=error.record_errors,
    )


class ReplicaManager:
    """Hosts partitions and their logs; appends, reads and waits in the purgatories."""

    def __init__(
        self,
        broker_id: int,
        log_dirs: Sequence[Path],
        purgatory_config: PurgatoryConfig | None = None,
        *,
        timers: LoopTimers | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        config = purgatory_config or PurgatoryConfig()
        self.broker_id = broker_id
        self.log_manager = LogManager(log_dirs, self._take_offline, clock_ms=clock_ms)
        # Told of each failed log directory after its partitions went offline (the
        # cluster reports them).
        self.log_dir_failure_listener: Callable[[Path, list[TopicPartition]], None] | None = None
        # The replication throttles (set by the broker; None: nothing is throttled):
        # what this broker sends followers, and what it fetches as one.
        self.leader_quota: ReplicationQuota | None = None
        self.follower_quota: ReplicationQuota | None = None
        # Told of every follower fetch after its read (the cluster's ISR bookkeeping).
        self.follower_fetch_listener: Callable[[Partition, int, int], None] | None = None
        # Whether a partition not hosted here exists in the cluster: then a request for
        # it gets NOT_LEADER_OR_FOLLOWER (Kafka's getPartitionOrError), not UNKNOWN_....
        self.partition_exists: Callable[[TopicPartition], bool] | None = None
        # Told (producer id, partitions, committed) after a marker landed on those
        # partitions: the group coordinator's ``on_transaction_completed``, which acts
        # on its ``__consumer_offsets`` partitions among them.
        self.txn_completion_listener: (
            Callable[[int, Sequence[TopicPartition], bool], None] | None
        ) = None
        # Told of every partition whose high watermark moved or whose leadership
        # changed, after this manager's own purgatories were checked: the share-partition
        # manager wakes its ShareFetch purgatory (this package never imports it).
        self.high_watermark_listener: Callable[[TopicPartition], None] | None = None
        self._clock_ms = clock_ms or system_clock_ms
        self._partitions: dict[TopicPartition, Partition] = {}
        # Per topic, a count of changes to what Metadata says of its partitions here
        # (hosted, leader, epoch, ISR, offline), so that an answer kept for the topic
        # is known to be current without looking at every partition.
        self._topic_generations: dict[str, int] = {}
        # Partitions appended to in this loop turn whose waiting fetches are not checked yet.
        self._fetch_wakeups: set[TopicPartition] = set()
        self._move_tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        # The owner starts and stops shared timers; a private set is started here.
        self._owns_timers = timers is None
        self._timers = LoopTimers() if timers is None else timers
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = self._purgatory(
            "Produce", config.produce_purge_interval_requests
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = self._purgatory(
            "Fetch", config.fetch_purge_interval_requests
        )
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            self._purgatory("DeleteRecords", config.delete_records_purge_interval_requests)
        )

    def _purgatory(self, name: str, purge_interval: int) -> DelayedOperationPurgatory[Any]:
        return DelayedOperationPurgatory(
            name,
            self._timers.new_timer(name),
            broker_id=self.broker_id,
            purge_interval=purge_interval,
            reaper_enabled=False,
        )

    @property
    def purgatories(self) -> tuple[DelayedOperationPurgatory[Any], ...]:
        """The Produce, Fetch and DeleteRecords purgatories."""
        return (
            self.produce_purgatory,
            self.fetch_purgatory,
            self.delete_records_purgatory,
        )

    def start(self) -> None:
        """Start the timer drivers (unless shared); must run on the event-loop thread."""
        if self._owns_timers:
            self._timers.start()

    def complete_delayed(self) -> int:
        """Complete every operation waiting in the purgatories now, as its timeout would
        (a stopping broker's last answers: what each has, timeouts for the rest);
        returns how many it completed."""
        completed = 0
        for tp in list(self._partitions):
            key = _key(tp)
            for purgatory in self.purgatories:
                for operation in purgatory.cancel_for_key(key):
                    if operation.force_complete():
                        completed += 1
        return completed

    def shutdown(self) -> None:
        """Stop the purgatories and timers, then flush and close every log."""
        if self._owns_timers:
            self._timers.stop()
        for purgatory in self.purgatories:
            purgatory.shutdown()
        for task in self._move_tasks.values():
            task.cancel()
        self._move_tasks.clear()
        self._partitions.clear()
        self.log_manager.close()

    # -- partitions -----------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        """The partition if this broker hosts it."""
        return self._partitions.get(tp)

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        """Every hosted partition."""
        return self._partitions

    def not_hosted_error(self, tp: TopicPartition) -> ErrorCode:
        """The error for a request on ``tp``, which this broker does not host."""
        if self.log_manager.is_offline(tp):
            return ErrorCode.kafka_storage_error
        if self.partition_exists is not None and self.partition_exists(tp):
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def host_partition(
        self, tp: TopicPartition, log_config: LogConfig, *, min_insync_replicas: int = 1
    ) -> Partition:
        """Host ``tp``, opening (recovering) or creating its log; its HW is left as loaded.

        A newly hosted partition starts as this broker's alone; the cluster's
        ``become_leader`` and ``become_follower`` then give it its real shape. Raises
        ``LogStorageError`` when its log directory is offline or fails now.
        """
        partition = self._partitions.get(tp)
        if partition is None:
            log = self.log_manager.get_or_create_log(tp, log_config)
            partition = Partition.leader(
                tp, log, self.broker_id, min_insync_replicas=min_insync_replicas
            )
            self._partitions[tp] = partition
            self._leadership_changed(tp)
            # A leadership change wakes every operation waiting on the partition.
            self._complete_delayed_requests(tp)
        return partition

    def topic_generation(self, topic: str) -> int:
        """A number that changes whenever a partition of ``topic`` is hosted, deleted,
        taken offline or changes leader, leader epoch or ISR through this manager."""
        return self._topic_generations.get(topic, 0)

    def _leadership_changed(self, tp: TopicPartition) -> None:
        self._topic_generations[tp.topic] = self._topic_generations.get(tp.topic, 0) + 1

    def make_leader(
        self, tp: TopicPartition, log_config: LogConfig, *, min_insync_replicas: int = 1
    ) -> Partition:
        """Lead ``tp`` as its only replica (a single broker), hosting it if needed.

        As Kafka's ``makeLeader``, the high watermark is raised to what the ISR holds,
        here this broker's whole log: every record acknowledged before a crash is
        readable again at once, however far the HW checkpoint lagged.
        """
        partition = self.host_partition(tp, log_config, min_insync_replicas=min_insync_replicas)
        partition.start_leader_epoch()
        if partition.maybe_increment_leader_hw():
            self._complete_delayed_requests(tp)
        return partition

    def make_follower(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Follow ``leader_id`` for ``tp`` from ``leader_epoch`` on; waiting operations wake."""
        partition = self._partitions[tp]
        partition.leader_id = leader_id
        partition.leader_epoch = leader_epoch
        partition.isr = set()
        self._leadership_changed(tp)
        self._complete_delayed_requests(tp)

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        """Lead ``tp`` again at the next leader epoch (fencing older epochs); returns it."""
        partition = self._partitions[tp]
        partition.leader_id = self.broker_id
        partition.leader_epoch += 1
        partition.start_leader_epoch()
        partition.isr = {self.broker_id, *partition.remote_replicas}
        self._leadership_changed(tp)
        self._complete_delayed_requests(tp)
        return partition.leader_epoch

    def mark_offline(self, tp: TopicPartition) -> None:
        """Take ``tp`` offline, as on a log directory failure; waiting operations wake."""
        self._partitions[tp].offline = True
        self._leadership_changed(tp)
        self._complete_delayed_requests(tp)

    def handle_storage_error(self, tp: TopicPartition, error: BaseException) -> None:
        """Take ``tp``'s log directory offline if ``error`` is an I/O failure of it."""
        cause = storage_failure(error)
        log_dir = self.log_manager.dir_of(tp)
        if cause is not None and log_dir is not None:
            self.log_manager.fail_dir(log_dir, cause)

    def _take_offline(self, log_dir: Path, tps: list[TopicPartition]) -> None:
        for tp in tps:
            if tp in self._partitions:
                self.mark_offline(tp)
        if self.log_dir_failure_listener is not None:
            self.log_dir_failure_listener(log_dir, tps)

    def delete_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop hosting ``tps`` and delete their logs; waiting operations complete."""
        for tp in tps:
            partition = self._partitions.pop(tp, None)
            if partition is None:
                continue
            self._cancel_move(tp)
            if not partition.offline:
                self.log_manager.delete_log(tp)
            self._leadership_changed(tp)
            self._complete_delayed_requests(tp)

    def update_topic_config(self, topic: str, log_config: LogConfig) -> None:
        """Apply changed topic settings (AlterConfigs) to every hosted partition of
        ``topic``: its log from the next append or retention pass on, its
        ``min.insync.replicas`` from the next acks=all produce on."""
        for tp, partition in self._partitions.items():
            if tp.topic == topic:
                partition.log.update_config(log_config)
                partition.min_insync_replicas = log_config.min_insync_replicas

    def _wake_follower_fetches(self, tp: TopicPartition) -> None:
        """Check the fetches waiting on ``tp`` once the appends of this loop turn are in.

        Piped Produce requests read together are appended one after another in one turn
        of the event loop; completing a follower's parked fetch at the first would send
        it one batch and leave the others to its next fetch, a round trip later. So the
        check runs at the start of the next turn (``call_soon``), still before anything
        else waits; without a running loop (unit tests) it runs at once.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.fetch_purgatory.check_and_complete(_key(tp))
            return
        if not self._fetch_wakeups:
            loop.call_soon(self._check_woken_fetches)
        self._fetch_wakeups.add(tp)

    def _check_woken_fetches(self) -> None:
        woken, self._fetch_wakeups = self._fetch_wakeups, set()
        for tp in woken:
            self.fetch_purgatory.check_and_complete(_key(tp))

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        key = _key(tp)
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        self.delete_records_purgatory.check_and_complete(key)
        if self.high_watermark_listener is not None:
            self.high_watermark_listener(tp)

    # -- produce --------------------------------------------------------------------

    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Mapping[TopicPartition, bytes],
        callback: ProduceCallback,
        *,
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, VerificationGuard] | None = None,
    ) -> None:
        """Append to the leaders, then answer through ``callback`` (maybe later).

        ``verification_guards``: per partition, the guard its transactional batches
        were verified with (``start_transaction_verification``); None when the
        produce was not verified.

        Internal topics (``__consumer_offsets``) take appends only from the broker's own
        coordinators (``internal_topics_allowed``); a client's produce to one gets
        INVALID_TOPIC_EXCEPTION, as Kafka's ``appendToLocalLog`` answers. The
        coordinators append with ``origin`` COORDINATOR: no sequence checks, and
        transaction markers allowed.
        """
        if required_acks not in _VALID_ACKS:
            callback(
                {tp: ProducePartitionResult(ErrorCode.invalid_required_acks) for tp in entries}
            )
            return
        appended = {
            tp: self._append_to_leader(
                tp,
                records,
                required_acks,
                origin,
                None if verification_guards is None else verification_guards.get(tp),
            )
            if internal_topics_allowed or not is_internal_topic(tp.topic)
            else (_refuse_internal_append(tp), _NO_OFFSET)
            for tp, records in entries.items()
        }
        results = {tp: result for tp, (result, _) in appended.items()}
        failed = all(r.error_code != ErrorCode.none for r in results.values())
        if required_acks != ACKS_ALL or failed:
            callback(results)
            return
        statuses = {
            tp: ProducePartitionStatus(required_offset=next_offset, result=result)
            for tp, (result, next_offset) in appended.items()
        }
        operation = DelayedProduce(
            timeout_ms, statuses, self.get_partition, callback, lock=threading.RLock()
        )
        self.produce_purgatory.try_complete_else_watch(operation, [_key(tp) for tp in entries])

    def start_transaction_verification(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int
    ) -> VerificationGuard | None:
        """The guard to verify a transactional produce to ``tp`` with (see
        ``Log.start_transaction_verification``); None where this broker does not lead
        ``tp`` (the append answers that)."""
        partition = self._partitions.get(tp)
        if partition is None or not partition.is_leader:
            return None
        return partition.log.start_transaction_verification(producer_id, producer_epoch)

    def _append_to_leader(
        self,
        tp: TopicPartition,
        records: bytes,
        required_acks: int,
        origin: AppendOrigin,
        verification_guard: VerificationGuard | None,
    ) -> tuple[ProducePartitionResult, int]:
        """The partition's result, and the offset its acks=all wait must reach."""
        partition = self._partitions.get(tp)
        if partition is None:
            return ProducePartitionResult(self.not_hosted_error(tp)), _NO_OFFSET
        try:
            info, hw_moved = partition.append_records_to_leader(
                records, required_acks, origin, verification_guard
            )
        except PartitionError as exc:
            return ProducePartitionResult(exc.error_code, error_message=str(exc)), _NO_OFFSET
        except RecordValidationError as exc:
            return refused_records(exc, partition.log.log_start_offset), _NO_OFFSET
        except (LogError, OSError) as exc:
            error = self._log_failure(tp, exc)
            return ProducePartitionResult(error, error_message=str(exc)), _NO_OFFSET
        if hw_moved:
            self._complete_delayed_requests(tp)
        else:
            # Followers wait for the LEO, which every append moves.
            self._wake_follower_fetches(tp)
        result = ProducePartitionResult(
            ErrorCode.none,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=info.log_start_offset,
            appended_messages=0 if info.duplicate else info.num_messages,
        )
        return result, info.last_offset + 1

    def append_txn_markers(
        self, markers: Sequence[TxnMarker], timeout_ms: int, callback: TxnMarkerCallback
    ) -> None:
        """Append each marker to its partitions (acks=all), then call ``callback`` once.

        One append per marker, as Kafka's ``handleWriteTxnMarkersRequest``; a partition
        not hosted here answers NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION. A
        callback may come synchronously, inside this call.
        """
        results: dict[int, dict[TopicPartition, int]] = {}
        remaining = [len(markers)]
        if not markers:
            callback(results)
            return

        def marker_done(marker: TxnMarker, answers: Mapping[TopicPartition, int]) -> None:
            results.setdefault(marker.producer_id, {}).update(answers)
            written = [tp for tp, error in answers.items() if error == ErrorCode.none]
            if written and self.txn_completion_listener is not None:
                self.txn_completion_listener(marker.producer_id, written, marker.commit)
            remaining[0] -= 1
            if remaining[0] == 0:
                callback(results)

        def appended_callback(
            marker: TxnMarker, errors: dict[TopicPartition, int]
        ) -> ProduceCallback:
            def appended(answers: Mapping[TopicPartition, ProducePartitionResult]) -> None:
                marker_done(marker, {**errors, **{tp: r.error_code for tp, r in answers.items()}})

            return appended

        now_ms = self._clock_ms()
        for marker in markers:
            errors: dict[TopicPartition, int] = {}
            entries: dict[TopicPartition, bytes] = {}
            batch = build_end_txn_marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.commit,
                now_ms,
            )
            for tp in marker.partitions:
                if tp in self._partitions:
                    entries[tp] = batch
                else:
                    errors[tp] = self.not_hosted_error(tp)
            if not entries:
                marker_done(marker, errors)
                continue
            self.append_records(
                timeout_ms,
                ACKS_ALL,
                entries,
                appended_callback(marker, errors),
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
            )

    def active_producer_state(
        self, tp: TopicPartition
    ) -> tuple[ErrorCode, list[ProducerStateSummary]]:
        """DescribeProducers: the producers of a partition any replica here holds."""
        partition = self._partitions.get(tp)
        if partition is None:
            return self.not_hosted_error(tp), []
        if partition.offline:
            return ErrorCode.kafka_storage_error, []
        try:
            return ErrorCode.none, partition.log.active_producers()
        except (LogError, OSError) as exc:
            return self._log_failure(tp, exc), []

    def remove_expired_producers(self, expiration_ms: int) -> None:
        """Apply ``producer.id.expiration.ms`` to every hosted log."""
        now_ms = self._clock_ms()
        for tp, partition in list(self._partitions.items()):
            if partition.offline:
                continue
            try:
                partition.log.remove_expired_producers(now_ms, expiration_ms)
            except (LogError, OSError) as exc:
                self._log_failure(tp, exc)

    # -- fetch ----------------------------------------------------------------------

    def fetch_messages(
        self,
        params: FetchParams,
        fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
        callback: FetchCallback,
    ) -> None:
        """Read, and answer now if there is enough or nothing to wait for, else wait."""
        results = self.read_from_local_log(params, fetch_infos)
        if params.is_from_follower:
            self._update_followers(params.replica_id, fetch_infos)
        bytes_readable = sum(r.size_bytes for r in results.values())
        any_error = any(r.error_code != ErrorCode.none for r in results.values())
        if (
            params.max_wait_ms <= 0
            or not fetch_infos
            or bytes_readable >= params.min_bytes
            or any_error
        ):
            callback(results)
            return
        statuses = {}
        for tp, info in fetch_infos:
            data = results[tp].data
            assert data is not None  # no error, so the read returned data
            statuses[tp] = FetchPartitionStatus(data.fetch_offset_metadata, info)
        operation = DelayedFetch(
            params,
            statuses,
            self.get_partition,
            lambda: self.read_from_local_log(params, fetch_infos),
            callback,
            (lambda tp: self._leader_throttles(tp, params.replica_id))
            if params.is_from_follower
            else None,
        )
        self.fetch_purgatory.try_complete_else_watch(operation, [_key(tp) for tp, _ in fetch_infos])

    def read_from_local_log(
        self,
        params: FetchParams,
        fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
    ) -> dict[TopicPartition, FetchPartitionResult]:
        """Read every partition, within the request's and each partition's max bytes."""
        remaining_bytes = params.max_bytes
        # Like Kafka, the first partition with data returns at least one whole batch,
        # even past max bytes, so a consumer never stalls on a large batch.
        min_one_message = not params.hard_max_bytes_limit
        results: dict[TopicPartition, FetchPartitionResult] = {}
        for tp, info in fetch_infos:
            result = self._read_partition(
                tp, info, params.isolation, min(info.max_bytes, remaining_bytes), min_one_message
            )
            if params.is_from_follower and self._leader_throttles(tp, params.replica_id):
                result = _without_records(result)
            if result.size_bytes > 0:
                min_one_message = False
                remaining_bytes = max(0, remaining_bytes - result.size_bytes)
            results[tp] = result
        if params.is_from_follower and self.leader_quota is not None:
            self.leader_quota.record_throttled((tp, r.size_bytes) for tp, r in results.items())
        return results

    def _leader_throttles(self, tp: TopicPartition, replica_id: int) -> bool:
        """Whether a follower fetch of ``tp`` by ``replica_id`` reads nothing now:
        the leader's replication quota is exceeded and that replica is not in sync."""
        quota = self.leader_quota
        partition = self._partitions.get(tp)
        if quota is None or partition is None:
            return False
        return quota.should_throttle(tp, in_sync=replica_id in partition.isr)

    def _read_partition(
        self,
        tp: TopicPartition,
        info: PartitionFetchInfo,
        isolation: FetchIsolation,
        max_bytes: int,
        min_one_message: bool,
    ) -> FetchPartitionResult:
        partition = self._partitions.get(tp)
        if partition is None:
            return FetchPartitionResult(self.not_hosted_error(tp))
        log = partition.log
        try:
            partition.check_leader(info.current_leader_epoch)
            high_watermark = log.high_watermark
            committed = isolation is FetchIsolation.TXN_COMMITTED
            if isolation is FetchIsolation.LOG_END:
                max_offset = None
            elif committed:
                max_offset = log.last_stable_offset
            else:
                max_offset = high_watermark
            data = log.read(
                info.fetch_offset,
                max_bytes,
                max_offset=max_offset,
                min_one_message=min_one_message,
                collect_aborted=committed,
            )
        except PartitionError as exc:
            return FetchPartitionResult(exc.error_code)
        except (LogError, OSError) as exc:
            return FetchPartitionResult(
                self._log_failure(tp, exc),
                high_watermark=log.high_watermark,
                last_stable_offset=partition.last_stable_offset(),
                log_start_offset=log.log_start_offset,
            )
        return FetchPartitionResult(
            ErrorCode.none,
            high_watermark=high_watermark,
            last_stable_offset=partition.last_stable_offset(),
            log_start_offset=log.log_start_offset,
            data=data,
        )

    def _update_followers(
        self, replica_id: int, fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]
    ) -> None:
        for tp, info in fetch_infos:
            partition = self._partitions.get(tp)
            if partition is None:
                continue
            if partition.update_follower_fetch_state(replica_id, info.fetch_offset):
                self._complete_delayed_requests(tp)
            if self.follower_fetch_listener is not None:
                self.follower_fetch_listener(partition, replica_id, info.fetch_offset)

    # -- delete records -------------------------------------------------------------

    def delete_records(
        self,
        timeout_ms: int,
        offsets: Mapping[TopicPartition, int],
        callback: DeleteRecordsCallback,
    ) -> None:
        """Move each log start offset to its requested offset (-1: the HW), then answer."""
        results = {tp: self._delete_before(tp, offset) for tp, offset in offsets.items()}
        statuses = {
            tp: DeleteRecordsPartitionStatus(required_offset=r.low_watermark, result=r)
            for tp, r in results.items()
        }
        operation = DelayedDeleteRecords(timeout_ms, statuses, self.get_partition, callback)
        self.delete_records_purgatory.try_complete_else_watch(
            operation, [_key(tp) for tp in offsets]
        )

    def _delete_before(self, tp: TopicPartition, offset: int) -> DeleteRecordsPartitionResult:
        if is_internal_topic(tp.topic):
            # As Kafka's deleteRecordsOnLocalLog: no client trims a coordinator's log.
            return DeleteRecordsPartitionResult(ErrorCode.invalid_topic_exception)
        partition = self._partitions.get(tp)
        if partition is None:
            return DeleteRecordsPartitionResult(self.not_hosted_error(tp))
        try:
            partition.check_leader()
        except PartitionError as exc:
            return DeleteRecordsPartitionResult(exc.error_code)
        log = partition.log
        target = log.high_watermark if offset == _LATEST_OFFSET else offset
        if target < 0 or target > log.high_watermark:
            return DeleteRecordsPartitionResult(ErrorCode.offset_out_of_range)
        try:
            log.delete_records_before(target)
        except (LogError, OSError) as exc:
            return DeleteRecordsPartitionResult(self._log_failure(tp, exc))
        # The log start may have moved the LSO past an open transaction's first batch.
        self.fetch_purgatory.check_and_complete(_key(tp))
        return DeleteRecordsPartitionResult(ErrorCode.none, low_watermark=target)

    # -- log directories ------------------------------------------------------------

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> ErrorCode:
        """Start moving ``tp``'s log to ``log_dir``; the partition's AlterReplicaLogDirs
        error, as Kafka's ``alterReplicaLogDirs`` answers it.

        INVALID_TOPIC_EXCEPTION for a topic name too long for the future directory's
        name; LOG_DIR_NOT_FOUND for a path not in ``log.dirs``; KAFKA_STORAGE_ERROR for an
        offline destination, an offline partition, or while any directory is offline (a
        future log is never created then); REPLICA_NOT_AVAILABLE for a partition not
        hosted here, whose log is created in ``log_dir`` if it comes here later. A log
        already there, or already moving there, answers NONE.
        """
        manager = self.log_manager
        destination = manager.resolve_dir(log_dir)
        partition = self._partitions.get(tp)
        error = self._move_refusal(tp, partition, destination)
        if error is not None or partition is None or destination is None:
            return error or ErrorCode.replica_not_available
        move = manager.move_of(tp)
        if move is not None and move.destination_dir == destination:
            return ErrorCode.none
        self._cancel_move(tp)
        if manager.dir_of(tp) == destination:
            return ErrorCode.none
        try:
            move = manager.start_move(tp, destination)
        except (OSError, LogStorageError) as error:
            _log.warning("cannot move the log of %s to %s: %s", tp, destination, error)
            return ErrorCode.kafka_storage_error
        task = asyncio.get_running_loop().create_task(self._run_move(partition, move))
        self._move_tasks[tp] = task
        task.add_done_callback(lambda done: self._move_done(tp, done))
        return ErrorCode.none

    def _move_refusal(
        self, tp: TopicPartition, partition: Partition | None, destination: Path | None
    ) -> ErrorCode | None:
        """Why ``tp``'s log cannot move to ``destination`` (None: not a log directory)
        now, or None."""
        if not movable(tp):
            return ErrorCode.invalid_topic_exception
        if destination is None:
            return ErrorCode.log_dir_not_found
        if self.log_manager.is_dir_offline(destination):
            return ErrorCode.kafka_storage_error
        if partition is None:
            # Created there if it comes to this broker later, as Kafka's
            # ``maybeUpdatePreferredLogDir``; the answer is still REPLICA_NOT_AVAILABLE.
            self.log_manager.prefer_dir(tp, destination)
            return (
                ErrorCode.kafka_storage_error
                if self.log_manager.is_offline(tp)
                else ErrorCode.replica_not_available
            )
        # No future log either while a directory is offline, as Kafka.
        some_offline = self.log_manager.offline_dir_count > 0
        if partition.offline or (some_offline and self.log_manager.dir_of(tp) != destination):
            return ErrorCode.kafka_storage_error
        return None

    def _cancel_move(self, tp: TopicPartition) -> None:
        task = self._move_tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        self.log_manager.abandon_move(tp)

    def _move_done(self, tp: TopicPartition, task: asyncio.Task[None]) -> None:
        if self._move_tasks.get(tp) is task:
            del self._move_tasks[tp]

    def _still_moving(self, partition: Partition, move: LogDirMove) -> bool:
        """Whether ``move`` should go on: not abandoned, its partition hosted and online
        (else its copy is removed)."""
        tp = move.tp
        if self.log_manager.move_of(tp) is not move:
            return False
        if self._partitions.get(tp) is not partition or partition.offline:
            self.log_manager.abandon_move(tp)
            return False
        return True

    async def _run_move(self, partition: Partition, move: LogDirMove) -> None:
        """Copy ``move`` while the partition serves, then swap it in (on the loop)."""
        tp = move.tp
        try:
            for _ in range(_COPY_PASSES):
                end_offset = partition.log.log_end_offset
                await asyncio.to_thread(move.copy_changed)
                if not self._still_moving(partition, move):
                    return
                move.copied_end_offset = end_offset
        except OSError as error:
            if not self._still_moving(partition, move):
                return  # abandoned meanwhile: its copy was removed under the pass
            _log.error("copying the log of %s to %s failed: %s", tp, move.destination_dir, error)
            self.log_manager.abandon_move(tp)
            if storage_failure(error) is not None:
                failed = str(error.filename or "")
                reading = failed.startswith(str(move.source))
                self.log_manager.fail_dir(
                    move.source.parent if reading else move.destination_dir, error
                )
            return
        try:
            partition.log = self.log_manager.finish_move(tp)
        except LogStorageError as error:
            _log.error("moving the log of %s to %s failed: %s", tp, move.destination_dir, error)
            # The source log, reopened where it was unless its directory failed.
            reopened = self.log_manager.open_log(tp)
            if reopened is not None:
                partition.log = reopened
            return
        # Fetches waiting on the closed log read the moved one.
        self._complete_delayed_requests(tp)

    def _log_failure(self, tp: TopicPartition, error: LogError | OSError) -> ErrorCode:
        """The error code for a log operation on ``tp`` that raised ``error``.

        An I/O failure takes the log's directory offline first; a log error carries
        its own Kafka code.
        """
        self.handle_storage_error(tp, error)
        if isinstance(error, OSError):
            return ErrorCode(LogStorageError.error_code)
        return ErrorCode(error.error_code)
