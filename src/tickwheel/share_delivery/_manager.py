"""``SharePartitionManager``: the share-partitions this broker leads, fetched and acknowledged.

Kafka's ``SharePartitionManager``, restated for one event loop. It owns:

- the share-partitions, created on first use: the state is read through the
  ``Persister``; a share-partition the group never consumed starts where the group
  config ``share.auto.offset.reset`` says (``latest``, the default: the high watermark;
  ``earliest``: the log start offset), and that start is written at once so that it
  does not move with the log while the group is idle. Concurrent first uses wait for
  one load;
- the share timer (``ShareLocks``), which holds every acquisition lock, and the
  ``ShareFetch`` purgatory with its own timer, both from the broker's ``LoopTimers``;
- the share sessions (``ShareSessionCache``).

``fetch`` acquires records for a member from each share-partition in turn, within the
request's ``max_records`` and ``max_bytes`` (only the answer's first batch may pass
``max_bytes``, Kafka's rule for fetches): it reads the partition's log from
``next_fetch_offset()`` -- up to the high watermark, or for a group whose
``share.isolation.level`` is ``read_committed`` up to the last stable offset, the
records of aborted transactions archived as they are met (Kafka's ``SharePartition``:
a read_committed group never sees them) -- first
``FIRST_READ_BYTES``, each further read twice the last, up to ``READ_CHUNK_BYTES`` (a
fetch of a few records copies a few kilobytes, a large one few chunks) -- hands the
record batches' offset ranges to ``SharePartition.acquire``, and answers the bytes of
the batches that hold acquired records, as stored (opaque batches; the client keeps only
the acquired offsets). With
nothing acquired and time to wait, a ``DelayedShareFetch`` waits in the purgatory,
woken by a high-watermark move (``on_high_watermark``, the ``ReplicaManager``'s
listener), a release, or a lock expiry; ``min_bytes`` is not waited for (Kafka's
DelayedShareFetch also waits for it): any acquirable record completes the wait.

``member_left`` (the share-group coordinator's listener) releases what a departed
member held and answers its waiting ShareFetches at once.

``acknowledge`` applies each share-partition's acknowledgements, then writes its state
through the persister *before* answering: once a client hears that a record was
accepted or rejected, a restart never delivers it again. A lock expiry writes the
state too (its archived records and start offset must survive), in a task the broker's
``LoopTimers`` tracks. A failed write is answered with the persister's error code; the
in-memory state keeps the acknowledgement (Kafka rolls it back), so a later write
carries it.

Concurrency: the broker's event loop only; ``await`` points are the persister's reads
and writes, around which no share-partition is left half-changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from tickwheel.log import Log, LogError
from tickwheel.purgatory import DelayedOperationPurgatory
from tickwheel.record import (
    CONTROL_FLAG_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    ControlType,
    iter_batches,
    read_control_batch,
)
from tickwheel.replica import (
    FetchIsolation,
    FetchParams,
    PartitionError,
    PartitionFetchInfo,
    ReplicaManager,
    TopicPartition,
)
from tickwheel.share_delivery._config import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    ShareConfig,
    by_duration_ms,
)
from tickwheel.share_delivery._delayed_share_fetch import DelayedShareFetch
from tickwheel.share_delivery._partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    ShareAcknowledgeError,
    SharePartition,
)
from tickwheel.share_delivery._persister import Persister, PersisterError, SharePartitionKey
from tickwheel.share_delivery._session import ShareSessionCache
from tickwheel.timer import LoopTimers

_log = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


_FENCED = frozenset({ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch})
"""Write errors after which the share-partition in memory is stale."""

_CONSUMER_REPLICA_ID = -1
READ_CHUNK_BYTES = 1 << 20
FIRST_READ_BYTES = 1 << 16
"""The first read of a ShareFetch: enough for hundreds of small records."""
"""The most a ShareFetch reads from a log at once. Kafka reads up to the request's max
bytes without copying them; here a read is copied into memory, and only the records a
member can acquire (at most ``max_records``, within the in-flight window) are sent, so
a long backlog is read a chunk at a time instead of 50 MiB per fetch."""


class _LogRead(NamedTuple):
    """A read of a share-partition's log: whole batches, and for a read_committed
    read the ``(producer id, first offset)`` of each aborted transaction it overlaps."""

    data: bytes
    aborted: list[tuple[int, int]]


@dataclass(slots=True)
class ShareFetchPartitionResult:
    """What a ShareFetch gets from one share-partition."""

    error_code: ErrorCode = ErrorCode.none
    records: bytes | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)


def record_batches(data: bytes, until_offset: int | None = None) -> list[tuple[int, int, int, int]]:
    """The whole batches in ``data``: (first offset, last offset, start, end) of each; with
    ``until_offset``, only as far as the first batch that reaches it."""
    batches = []
    for position, header in iter_batches(data):
        last_offset = header.last_offset
        batches.append((header.base_offset, last_offset, position, position + header.size_bytes))
        if until_offset is not None and last_offset >= until_offset:
            break
    return batches


def aborted_batches(data: bytes, aborted_transactions: Sequence[tuple[int, int]]) -> set[int]:
    """The first offsets of the batches in ``data`` that belong to an aborted transaction,
    given the read's ``(producer id, first offset)`` of each (Kafka's
    ``fetchAbortedTransactionRecordBatches``): a transactional data batch of a producer
    whose aborted transaction began at or before the batch's end, until that producer's
    ABORT marker."""
    pending = sorted(aborted_transactions, key=lambda txn: txn[1])
    aborting: set[int] = set()
    batches = set()
    for position, header in iter_batches(data):
        while pending and pending[0][1] <= header.last_offset:
            aborting.add(pending.pop(0)[0])
        if not header.attributes & TRANSACTIONAL_FLAG_MASK or header.producer_id not in aborting:
            continue
        if not header.attributes & CONTROL_FLAG_MASK:
            batches.add(header.base_offset)
        elif _is_abort_marker(data[position : position + header.size_bytes], header):
            aborting.discard(header.producer_id)
    return batches


def _is_abort_marker(batch: bytes, header: BatchHeader) -> bool:
    try:
        marker = read_control_batch(batch, header)
    except ValueError:
        return False
    return marker is not None and marker.control_type is ControlType.ABORT


def _keep_batches_holding(
    batches: Sequence[tuple[int, int, int, int]],
    acquired: Sequence[AcquiredRecords],
    data: bytes,
    chunks: dict[int, bytes],
) -> int:
    """Put into ``chunks`` the bytes of each batch (in offset order) that holds a record
    of ``acquired`` (in offset order), once; the bytes added."""
    added = 0
    ranges = iter(sorted(acquired, key=lambda a: a.first_offset))
    current = next(ranges, None)
    for first, last, start, end in batches:
        while current is not None and current.last_offset < first:
            current = next(ranges, None)
        if current is None:
            break
        if current.first_offset <= last and first not in chunks:
            chunks[first] = data[start:end]
            added += end - start
    return added


class SharePartitionManager:
    """Share-partitions, their locks, the ShareFetch purgatory and the share sessions."""

    def __init__(
        self,
        config: ShareConfig,
        replica_manager: ReplicaManager,
        persister: Persister,
        *,
        timers: LoopTimers,
        topic_name: Callable[[uuid.UUID], str | None],
        group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {},
        broker_id: int = 0,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.config = config
        self.persister = persister
        self.sessions = ShareSessionCache(config.group_share_max_share_sessions)
        self._replica_manager = replica_manager
        self._timers = timers
        self._topic_name = topic_name
        self._group_configs = group_configs
        # Epoch milliseconds, the time record timestamps are in (``by_duration`` resets).
        self._clock_ms = clock_ms
        self.lock_timer = timers.new_timer("ShareLocks")
        self.purgatory: DelayedOperationPurgatory[DelayedShareFetch] = DelayedOperationPurgatory(
            "ShareFetch",
            timers.new_timer("ShareFetch"),
            broker_id=broker_id,
            purge_interval=config.share_fetch_purgatory_purge_interval_requests,
            reaper_enabled=False,
        )
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._loading: dict[SharePartitionKey, asyncio.Future[SharePartition]] = {}
        # Share-partitions by the topic partition they read, for high-watermark wake-ups.
        self._by_topic_partition: dict[TopicPartition, dict[SharePartitionKey, None]] = {}
        # The ShareFetches waiting in the purgatory, by (group id, member id).
        self._waiting: dict[tuple[str, str], dict[DelayedShareFetch, None]] = {}

    def lock_duration_ms(self, group_id: str) -> int:
        """The acquisition lock duration of ``group_id``'s records."""
        return self.config.lock_duration_ms(self._group_configs(group_id))

    # -- loading ----------------------------------------------------------------------

    def topic_partition(self, key: SharePartitionKey) -> TopicPartition | None:
        """The topic partition a share-partition reads, or None for an unknown topic id."""
        name = self._topic_name(key.topic_id)
        return None if name is None else TopicPartition(name, key.partition)

    def get(self, key: SharePartitionKey) -> SharePartition | None:
        """The share-partition if loaded."""
        return self._partitions.get(key)

    async def share_partition(self, key: SharePartitionKey) -> SharePartition | ErrorCode:
        """The share-partition of ``key``, loaded if needed; or why it cannot be served.

        A share-partition loaded under an older leader epoch of its partition is
        dropped and loaded again: while another broker led the partition, its
        share-partition moved on, and only the persister knows where to.
        """
        partition = self._partitions.get(key)
        replica_epoch = self._leader_epoch(key)
        if partition is not None and partition.leader_epoch == replica_epoch:
            return partition
        if partition is not None:
            self.forget(key)
        tp = self.topic_partition(key)
        if tp is None:
            return ErrorCode.unknown_topic_id
        replica = self._replica_manager.get_partition(tp)
        if replica is None:
            return self._replica_manager.not_hosted_error(tp)
        try:
            replica.check_leader(-1)
        except PartitionError as exc:
            return exc.error_code
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        loading = asyncio.get_running_loop().create_future()
        self._loading[key] = loading
        try:
            loaded = await self._load(key, tp)
        except PersisterError as exc:
            loading.set_exception(exc)
            # Retrieved here, so that a load nobody else waited for logs no warning.
            loading.exception()
            raise
        else:
            loading.set_result(loaded)
        finally:
            del self._loading[key]
        return loaded

    async def _load(self, key: SharePartitionKey, tp: TopicPartition) -> SharePartition:
        state = await self.persister.read_state(key)
        limit = self.config.group_share_delivery_count_limit
        max_locks = self.config.group_share_partition_max_record_locks
        if state is None:
            replica = self._replica_manager.get_partition(tp)
            reset = self._group_configs(key.group_id).get(SHARE_AUTO_OFFSET_RESET) or LATEST
            start_offset = 0 if replica is None else self._reset_offset(replica.log, reset)
            partition = SharePartition(
                key,
                start_offset,
                timer=self.lock_timer,
                delivery_count_limit=limit,
                max_in_flight_records=max_locks,
                on_change=self._on_lock_expired,
                leader_epoch=self._leader_epoch(key),
            )
            await self.persister.write_state(key, partition.state())
        else:
            partition = SharePartition.from_state(
                key,
                state,
                timer=self.lock_timer,
                delivery_count_limit=limit,
                max_in_flight_records=max_locks,
                on_change=self._on_lock_expired,
            )
        # Its writes carry this broker's leader epoch (a stored state carries the epoch of
        # the leader that wrote it): the share coordinator fences the writes of a leader
        # the partition has since left behind.
        partition.leader_epoch = self._leader_epoch(key)
        self._partitions[key] = partition
        self._by_topic_partition.setdefault(tp, {})[key] = None
        _log.info("loaded share-partition %s at start offset %d", key, partition.start_offset)
        return partition

    def _reset_offset(self, log: Log, reset: str) -> int:
        """Where a group that never consumed ``log`` starts (``share.auto.offset.reset``)."""
        if reset == EARLIEST:
            return log.log_start_offset
        duration_ms = by_duration_ms(reset)
        if duration_ms is not None:
            found = log.offset_for_timestamp(self._clock_ms() - duration_ms)
            if found is not None:
                return min(found.offset, log.high_watermark)
        return log.high_watermark

    def _leader_epoch(self, key: SharePartitionKey) -> int:
        tp = self.topic_partition(key)
        replica = None if tp is None else self._replica_manager.get_partition(tp)
        return -1 if replica is None else replica.leader_epoch

    def forget(self, key: SharePartitionKey, stale: SharePartition | None = None) -> None:
        """Drop the share-partition of ``key`` (only if it is still ``stale``, when given)
        and its locks; the next use loads it again from the persister (its state was
        reset, or its leader moved)."""
        partition = self._partitions.get(key)
        if partition is None or (stale is not None and partition is not stale):
            return
        del self._partitions[key]
        partition.release_all()
        tp = self.topic_partition(key)
        keys = self._by_topic_partition.get(tp) if tp is not None else None
        if keys is not None:
            keys.pop(key, None)
            if not keys and tp is not None:
                del self._by_topic_partition[tp]
        self.purgatory.check_and_complete(key)

    async def _load_or_error(self, key: SharePartitionKey) -> SharePartition | ErrorCode:
        try:
            return await self.share_partition(key)
        except PersisterError as exc:
            return exc.error_code

    # -- fetching ---------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        keys: Sequence[SharePartitionKey],
        *,
        max_wait_ms: int,
        max_records: int,
        max_bytes: int,
    ) -> dict[SharePartitionKey, ShareFetchPartitionResult]:
        """Acquire records of ``keys`` for ``member_id``; wait up to ``max_wait_ms`` in
        the ShareFetch purgatory when there is nothing to acquire."""
        results: dict[SharePartitionKey, ShareFetchPartitionResult] = {}
        loaded: list[SharePartition] = []
        for key in keys:
            outcome = await self._load_or_error(key)
            if isinstance(outcome, ErrorCode):
                results[key] = ShareFetchPartitionResult(outcome)
            else:
                loaded.append(outcome)
        lock_duration_ms = self.lock_duration_ms(group_id)
        committed = self._read_committed(group_id)

        def acquire() -> dict[SharePartitionKey, ShareFetchPartitionResult]:
            return self._acquire_all(
                member_id, loaded, (max_records, max_bytes), lock_duration_ms, committed
            )

        now = acquire()
        anything = any(r.acquired or r.error_code != ErrorCode.none for r in now.values())
        if anything or max_wait_ms <= 0 or not loaded:
            return {**results, **now}
        answer: asyncio.Future[dict[SharePartitionKey, ShareFetchPartitionResult]] = (
            asyncio.get_running_loop().create_future()
        )

        member = (group_id, member_id)

        def acquire_and_answer(acquiring: bool) -> None:
            waiting = self._waiting.get(member)
            if waiting is not None:
                waiting.pop(operation, None)
                if not waiting:
                    del self._waiting[member]
            # A request whose connection closed meanwhile acquires nothing.
            if not answer.done():
                nothing = {p.key: ShareFetchPartitionResult() for p in loaded}
                answer.set_result(acquire() if acquiring else nothing)

        operation = DelayedShareFetch(
            max_wait_ms, [p.key for p in loaded], self._can_acquire, acquire_and_answer
        )
        self._waiting.setdefault(member, {})[operation] = None
        self.purgatory.try_complete_else_watch(operation, operation.keys)
        return {**results, **await answer}

    def _acquire_all(
        self,
        member_id: str,
        partitions: Sequence[SharePartition],
        limits: tuple[int, int],
        lock_duration_ms: int,
        committed: bool,
    ) -> dict[SharePartitionKey, ShareFetchPartitionResult]:
        """Acquire from each share-partition in turn within ``limits``, the request's max
        records and max bytes; ``committed``: read_committed."""
        max_records, max_bytes = limits
        results = {}
        sent_bytes = 0
        for partition in partitions:
            if max_records <= 0 or sent_bytes >= max_bytes or not self._is_current(partition):
                # A share-partition dropped while this fetch waited is loaded again by
                # the member's next fetch.
                results[partition.key] = ShareFetchPartitionResult()
                continue
            result = self._acquire(
                partition,
                member_id,
                max_records,
                (sent_bytes, max_bytes),
                lock_duration_ms,
                committed=committed,
            )
            max_records -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            sent_bytes += 0 if result.records is None else len(result.records)
            results[partition.key] = result
        return results

    def _acquire(
        self,
        partition: SharePartition,
        member_id: str,
        max_records: int,
        response_bytes: tuple[int, int],
        lock_duration_ms: int,
        *,
        committed: bool,
    ) -> ShareFetchPartitionResult:
        """Read the log from the share-partition's next fetch offset and acquire, a chunk
        of at most ``READ_CHUNK_BYTES`` at a time, until ``max_records`` or the response's
        max bytes is reached or nothing more can be acquired. ``response_bytes`` is the
        bytes the response already holds and its max bytes: as in Kafka's fetch, only the
        response's first batch may pass that limit (so that a batch larger than the
        limit still makes progress); every later read stops short of it."""
        tp = self.topic_partition(partition.key)
        if tp is None:
            return ShareFetchPartitionResult(ErrorCode.unknown_topic_id)
        acquired: list[AcquiredRecords] = []
        chunks: dict[int, bytes] = {}  # the batches holding acquired records, by offset
        sent_bytes, max_bytes = response_bytes
        read_bytes = min(FIRST_READ_BYTES, READ_CHUNK_BYTES)
        while max_records > 0 and sent_bytes < max_bytes:
            fetch_offset = partition.next_fetch_offset()
            if fetch_offset is None:
                break
            remaining_bytes = max_bytes - sent_bytes
            first_read = sent_bytes == 0  # the response's first batch: sent whole
            chunk_bytes = min(read_bytes, remaining_bytes)
            read = self._read(tp, fetch_offset, chunk_bytes, first_read, committed=committed)
            if (
                isinstance(read, _LogRead)
                and not read.data
                and not first_read
                and chunk_bytes < remaining_bytes
            ):
                # The next batch is larger than a chunk but may fit the response.
                read = self._read(tp, fetch_offset, remaining_bytes, False, committed=committed)
            read_bytes = min(2 * read_bytes, READ_CHUNK_BYTES)
            if read == ErrorCode.offset_out_of_range and self._skip_deleted(tp, partition):
                continue
            if isinstance(read, ErrorCode):
                if acquired:
                    break  # answer what is held; the error comes back on the next fetch
                return ShareFetchPartitionResult(read)
            # At most max_records can be acquired, and at most the in-flight records
            # before them are not available: no batch past those is looked at (a small
            # fetch from a large backlog must not parse a whole chunk's headers).
            batches = record_batches(read.data, fetch_offset + max_records + partition.in_flight)
            got = partition.acquire(
                member_id,
                [(first, last) for first, last, _, _ in batches],
                max_records=max_records,
                lock_duration_ms=lock_duration_ms,
                aborted=aborted_batches(read.data, read.aborted) if read.aborted else (),
            )
            if not got:
                if read.aborted and partition.next_fetch_offset() != fetch_offset:
                    continue  # only aborted records were read, and archived: read on
                break
            acquired.extend(got)
            max_records -= sum(a.last_offset - a.first_offset + 1 for a in got)
            sent_bytes += _keep_batches_holding(batches, got, read.data, chunks)
        if not acquired:
            return ShareFetchPartitionResult()
        return ShareFetchPartitionResult(records=b"".join(chunks.values()), acquired=acquired)

    def _skip_deleted(self, tp: TopicPartition, partition: SharePartition) -> bool:
        """Move the share-partition past records the log deleted; True if it moved."""
        replica = self._replica_manager.get_partition(tp)
        if replica is None or replica.log.log_start_offset <= partition.start_offset:
            return False
        partition.skip_to(replica.log.log_start_offset)
        self._track(self._write(partition))
        return True

    def _read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        min_one_batch: bool,
        *,
        committed: bool,
    ) -> _LogRead | ErrorCode:
        """Whole batches from ``fetch_offset`` within ``max_bytes`` (with
        ``min_one_batch``, at least one even if larger), below the high watermark, or
        the last stable offset when ``committed``."""
        params = FetchParams(
            replica_id=_CONSUMER_REPLICA_ID,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation=FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK,
            hard_max_bytes_limit=not min_one_batch,
        )
        info = PartitionFetchInfo(fetch_offset=fetch_offset, max_bytes=max_bytes)
        read = self._replica_manager.read_from_local_log(params, [(tp, info)])[tp]
        if read.error_code != ErrorCode.none:
            return ErrorCode(read.error_code)
        if read.data is None:
            return _LogRead(b"", [])
        try:
            data = read.data.records.read_bytes()
        except (LogError, OSError) as exc:
            _log.warning("share fetch of %s failed to read its log: %s", tp, exc)
            return ErrorCode.kafka_storage_error
        return _LogRead(data, read.data.aborted_transactions or [])

    def _read_committed(self, group_id: str) -> bool:
        """Whether the group reads committed records only (``share.isolation.level``)."""
        return self._group_configs(group_id).get(SHARE_ISOLATION_LEVEL) == READ_COMMITTED

    def _can_acquire(self, key: SharePartitionKey) -> bool:
        """``DelayedShareFetch``'s question: records to acquire (Case A) or an error (B)."""
        partition = self._partitions.get(key)
        tp = self.topic_partition(key)
        if partition is None or tp is None:
            return True
        replica = self._replica_manager.get_partition(tp)
        if replica is None:
            return True
        try:
            replica.check_leader(-1)
        except PartitionError:
            return True
        if self._read_committed(key.group_id):
            return partition.can_acquire(replica.last_stable_offset())
        return partition.can_acquire(replica.log.high_watermark)

    def on_high_watermark(self, tp: TopicPartition) -> None:
        """The ``ReplicaManager``'s listener: ``tp``'s high watermark moved or its
        leadership changed; wake the ShareFetches waiting on its share-partitions."""
        for key in list(self._by_topic_partition.get(tp, ())):
            self.purgatory.check_and_complete(key)

    # -- acknowledging and releasing --------------------------------------------------

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        acknowledgements: Mapping[SharePartitionKey, Sequence[AcknowledgementBatch]],
    ) -> dict[SharePartitionKey, ErrorCode]:
        """Apply each share-partition's acknowledgements and write its state; the error
        code of each (none once the state is durable)."""
        lock_duration_ms = self.lock_duration_ms(group_id)
        results: dict[SharePartitionKey, ErrorCode] = {}
        for key, batches in acknowledgements.items():
            outcome = await self._load_or_error(key)
            if isinstance(outcome, ErrorCode):
                results[key] = outcome
                continue
            try:
                outcome.acknowledge(member_id, batches, lock_duration_ms=lock_duration_ms)
            except ShareAcknowledgeError as exc:
                results[key] = exc.error_code
                continue
            results[key] = await self._write(outcome)
            # A release, or a start offset that moved, may let a waiting fetch acquire.
            self.purgatory.check_and_complete(key)
        return results

    async def release_member(self, group_id: str, member_id: str) -> None:
        """Give back every record ``member_id`` of ``group_id`` holds (its share session
        closed, or it left the group)."""
        for key, partition in list(self._partitions.items()):
            if key.group_id == group_id and partition.release_member(member_id):
                await self._write(partition)
                self.purgatory.check_and_complete(key)

    def member_left(self, group_id: str, member_id: str, expired: bool) -> None:
        """The group coordinator's listener: ``member_id`` left ``group_id`` (its session
        ``expired``, or it said so). Its records are released in the background; a
        timed-out member's share session is closed, while a member that left closes its
        own with its final request. Its waiting ShareFetches are answered at once."""
        if expired:
            self.sessions.remove(group_id, member_id)
        else:
            self.sessions.mark_departed(group_id, member_id)
        for operation in list(self._waiting.pop((group_id, member_id), {})):
            operation.abandon()
        self._track(self.release_member(group_id, member_id))

    def connection_closed(self, connection_id: int) -> None:
        """The broker's listener: a client connection closed, and the share sessions it
        opened close with it. What their members hold stays locked until the locks
        expire (or the member's group session does): a member whose connection broke may
        reconnect and acknowledge."""
        self.sessions.remove_connection(connection_id)

    def _is_current(self, partition: SharePartition) -> bool:
        return self._partitions.get(partition.key) is partition

    def _on_lock_expired(self, partition: SharePartition, released: bool) -> None:
        if not self._is_current(partition):
            return
        self._track(self._write(partition))
        if released:
            self.purgatory.check_and_complete(partition.key)

    def _track(self, work: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(_discard(work))
        self._timers.track(task)

    async def _write(self, partition: SharePartition) -> ErrorCode:
        """Write the share-partition's state now; its error code."""
        if not self._is_current(partition):
            # Dropped since (its leader moved, or its state was reset): what was done to
            # it cannot be kept, and the client hears so.
            return ErrorCode.not_leader_or_follower
        try:
            await self.persister.write_state(partition.key, partition.state())
        except PersisterError as exc:
            _log.warning("writing the state of %s failed: %s", partition.key, exc)
            if exc.error_code in _FENCED:
                # Reset by an administrator, or led elsewhere since: load it again.
                self.forget(partition.key, partition)
            return exc.error_code
        return ErrorCode.none

    def shutdown(self) -> None:
        """Stop the purgatory and drop every lock (the broker stops its timers)."""
        self.purgatory.shutdown()
        for partition in self._partitions.values():
            partition.release_all()


async def _discard(work: Coroutine[Any, Any, object]) -> None:
    await work
