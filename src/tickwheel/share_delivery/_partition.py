"""``SharePartition``: one share group's delivery state over one topic partition.

Kafka's share-partition (``kafka.server.share.SharePartition``), restated. The records
of the partition from the *share-partition start offset* (SPSO, ``start_offset``) up to
the *share-partition end offset* (SPEO, ``end_offset``, exclusive here) are *in flight*,
each in one state with a delivery count::

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                     |  --REJECT/GAP--> ARCHIVED
        +--RELEASE/expiry-----+  (ARCHIVED instead once delivered delivery_count_limit times)

Records below the SPSO are done (acknowledged or archived); records at or past the SPEO
were never acquired and are available. Acquiring takes the available in-flight records
first and then new ones from the log, never letting the window pass
``max_in_flight_records`` (``group.share.partition.max.record.locks``). After every
change the SPSO moves past the contiguous prefix of acknowledged and archived records,
and those leave the window.

Acquisition takes the offset ranges of the record batches the log returned
(``acquire(member_id, batches, ...)``): this class never reads the log, so it is tested
against a reference model with nothing but a manual clock. Each contiguous run of
offsets acquired in one call gets one ``AcquisitionLock`` on the share timer; records
point at their lock, and the lock counts how many it still holds.

Durability belongs to the caller (``SharePartitionManager``): ``state()`` is the
persister's view of the window -- acquired records written as AVAILABLE -- and
``from_state`` rebuilds a share-partition from it, so that a restart delivers again
exactly the records nobody acknowledged.

``on_change`` is called after an expiry with whether records became available again:
the manager persists the new state and wakes the ShareFetches waiting on this key.

Concurrency: every method runs on the broker's event loop, locks' expiries included.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from tickwheel.share_delivery._lock import AcquisitionLock
from tickwheel.share_delivery._persister import (
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)
from tickwheel.timer import SystemTimer

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(enum.IntEnum):
    """What a client says of a record it acquired (ShareFetch/ShareAcknowledge)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A run of acquired offsets with one delivery count, as ShareFetch answers it."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Offsets ``first_offset..last_offset`` and their types: one for all, or one each."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


class ShareAcknowledgeError(Exception):
    """An acknowledgement refused as a whole, with the partition's error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class _Record:
    """One in-flight record's state, delivery count, holder and lock."""

    __slots__ = ("delivery_count", "lock", "state")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.lock: AcquisitionLock | None = None


class SharePartition:
    """The in-flight records of one share-partition and their acquisition locks."""

    def __init__(
        self,
        key: SharePartitionKey,
        start_offset: int,
        *,
        timer: SystemTimer,
        delivery_count_limit: int,
        max_in_flight_records: int,
        on_change: Callable[[SharePartition, bool], None] = lambda partition, available: None,
        state_epoch: int = 0,
        leader_epoch: int = 0,
    ) -> None:
        self.key = key
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self._timer = timer
        self._delivery_count_limit = delivery_count_limit
        self._max_in_flight_records = max_in_flight_records
        self._on_change = on_change
        self._records: dict[int, _Record] = {}
        self._available = 0  # in-flight records in AVAILABLE

    @classmethod
    def from_state(
        cls,
        key: SharePartitionKey,
        state: ShareGroupState,
        *,
        timer: SystemTimer,
        delivery_count_limit: int,
        max_in_flight_records: int,
        on_change: Callable[[SharePartition, bool], None] = lambda partition, available: None,
    ) -> SharePartition:
        """A share-partition as the persister stored it; acquired records come back
        available (nobody holds their locks any more), offsets no batch covers too."""
        partition = cls(
            key,
            state.start_offset,
            timer=timer,
            delivery_count_limit=delivery_count_limit,
            max_in_flight_records=max_in_flight_records,
            on_change=on_change,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
        )
        stored: dict[int, tuple[RecordState, int]] = {}
        for batch in state.state_batches:
            delivery_state = batch.delivery_state
            if delivery_state is RecordState.ACQUIRED:
                delivery_state = RecordState.AVAILABLE
            for offset in range(max(batch.first_offset, state.start_offset), batch.last_offset + 1):
                stored[offset] = (delivery_state, batch.delivery_count)
        end_offset = max(stored, default=state.start_offset - 1) + 1
        for offset in range(state.start_offset, end_offset):
            delivery_state, delivery_count = stored.get(offset, (RecordState.AVAILABLE, 0))
            partition._records[offset] = _Record(delivery_state, delivery_count)
            if delivery_state is RecordState.AVAILABLE:
                partition._available += 1
        partition.end_offset = end_offset
        partition._advance_start()
        return partition

    # -- reading ----------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Records between the SPSO and the SPEO."""
        return self.end_offset - self.start_offset

    def record_state(self, offset: int) -> tuple[RecordState, int] | None:
        """The state and delivery count of an in-flight ``offset``, or None."""
        record = self._records.get(offset)
        return None if record is None else (record.state, record.delivery_count)

    def next_fetch_offset(self) -> int | None:
        """Where the log should be read to acquire: the first available in-flight record,
        else the SPEO; None when the window is full and nothing in it is available."""
        if self._available:
            for offset in range(self.start_offset, self.end_offset):
                if self._records[offset].state is RecordState.AVAILABLE:
                    return offset
        if self.in_flight >= self._max_in_flight_records:
            return None
        return self.end_offset

    def can_acquire(self, high_watermark: int) -> bool:
        """Whether an acquire now could get a record below ``high_watermark``."""
        if self._available:
            return True
        return self.end_offset < high_watermark and self.in_flight < self._max_in_flight_records

    def state(self) -> ShareGroupState:
        """The persister's view: the SPSO and runs of equal state and delivery count,
        acquired records written as available."""
        batches: list[PersisterStateBatch] = []
        run_first = self.start_offset
        run_key: tuple[RecordState, int] | None = None
        for offset in range(self.start_offset, self.end_offset):
            record = self._records[offset]
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            key = (state, record.delivery_count)
            if key != run_key:
                if run_key is not None:
                    batches.append(PersisterStateBatch(run_first, offset - 1, *run_key))
                run_first, run_key = offset, key
        if run_key is not None:
            batches.append(PersisterStateBatch(run_first, self.end_offset - 1, *run_key))
        return ShareGroupState(
            state_epoch=self.state_epoch,
            leader_epoch=self.leader_epoch,
            start_offset=self.start_offset,
            state_batches=tuple(batches),
        )

    # -- acquiring --------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, int]],
        *,
        max_records: int,
        lock_duration_ms: int,
        aborted: Collection[int] = (),
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the available offsets of the log batches
        ``(first_offset, last_offset)`` read from ``next_fetch_offset()`` on.

        Whole batches are taken until ``max_records`` is reached (Kafka's batch-optimized
        mode may pass it to finish a batch); new records stop at the in-flight limit.
        Offsets the log skipped between batches (compacted away) are archived, and so
        are the available records of the batches whose first offset is in ``aborted``
        (an aborted transaction's, for a read_committed group): never delivered.
        """
        acquired: list[AcquiredRecords] = []
        count = 0
        run_first = -1
        run_last = -2
        for first_offset, last_offset in batches:
            if count >= max_records:
                break
            skipped = first_offset in aborted
            for offset in range(max(first_offset, self.start_offset), last_offset + 1):
                record = self._records.get(offset)
                if record is None:
                    if self.in_flight >= self._max_in_flight_records:
                        break
                    self._archive_gap(offset)
                    record = _Record(RecordState.AVAILABLE, 0)
                    self._records[offset] = record
                    self._available += 1
                    self.end_offset = offset + 1
                if record.state is not RecordState.AVAILABLE:
                    continue
                if skipped:
                    record.state = RecordState.ARCHIVED
                    self._available -= 1
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                self._available -= 1
                count += 1
                if offset != run_last + 1:
                    self._lock_run(member_id, run_first, run_last, lock_duration_ms, acquired)
                    run_first = offset
                run_last = offset
        self._lock_run(member_id, run_first, run_last, lock_duration_ms, acquired)
        self._advance_start()
        return acquired

    def _archive_gap(self, offset: int) -> None:
        """Offsets between the SPEO and ``offset`` the log no longer has are archived."""
        for missing in range(self.end_offset, offset):
            self._records[missing] = _Record(RecordState.ARCHIVED, 0)
        self.end_offset = max(self.end_offset, offset)

    def _lock_run(
        self,
        member_id: str,
        first_offset: int,
        last_offset: int,
        lock_duration_ms: int,
        acquired: list[AcquiredRecords],
    ) -> None:
        """One lock over the acquired run ``first_offset..last_offset`` (if any), and its
        offsets in ``acquired``, split where the delivery count changes."""
        if last_offset < first_offset:
            return
        lock = AcquisitionLock(lock_duration_ms, first_offset, last_offset, member_id, self._expire)
        split_first = first_offset
        records = self._records
        for offset in range(first_offset, last_offset + 1):
            records[offset].lock = lock
            if records[offset].delivery_count != records[split_first].delivery_count:
                acquired.append(
                    AcquiredRecords(split_first, offset - 1, records[split_first].delivery_count)
                )
                split_first = offset
        acquired.append(
            AcquiredRecords(split_first, last_offset, records[split_first].delivery_count)
        )
        self._timer.add(lock)

    # -- acknowledging ----------------------------------------------------------------

    def acknowledge(
        self,
        member_id: str,
        batches: Sequence[AcknowledgementBatch],
        *,
        lock_duration_ms: int,
    ) -> bool:
        """Apply a member's acknowledgements, all or none; True if records became
        available again (a RELEASE). Raises ``ShareAcknowledgeError``: INVALID_REQUEST
        for a malformed batch or batches out of order or overlapping, INVALID_RECORD_STATE
        for an offset the member does not hold."""
        plan: list[tuple[int, AcknowledgeType]] = []
        previous_last = -1
        for batch in batches:
            span = batch.last_offset - batch.first_offset + 1
            types = batch.acknowledge_types
            if span <= 0 or len(types) not in (1, span) or batch.first_offset <= previous_last:
                raise ShareAcknowledgeError(
                    ErrorCode.invalid_request,
                    f"batch {batch.first_offset}..{batch.last_offset} is malformed, or "
                    "overlaps or precedes the one before it",
                )
            previous_last = batch.last_offset
            if batch.first_offset < self.start_offset or batch.last_offset >= self.end_offset:
                # Checked before the offsets are walked: a client cannot make us loop
                # over a range it never acquired.
                raise ShareAcknowledgeError(
                    ErrorCode.invalid_record_state,
                    f"offsets {batch.first_offset}..{batch.last_offset} are not in flight",
                )
            try:
                kinds = [AcknowledgeType(t) for t in types]
            except ValueError as exc:
                raise ShareAcknowledgeError(ErrorCode.invalid_request, str(exc)) from exc
            for index in range(span):
                offset = batch.first_offset + index
                record = self._records.get(offset)
                if (
                    record is None
                    or record.state is not RecordState.ACQUIRED
                    or record.lock is None
                    or record.lock.member_id != member_id
                ):
                    raise ShareAcknowledgeError(
                        ErrorCode.invalid_record_state,
                        f"offset {offset} is not acquired by member {member_id}",
                    )
                plan.append((offset, kinds[0] if len(kinds) == 1 else kinds[index]))
        released = False
        renewed: list[int] = []
        for offset, kind in plan:
            record = self._records[offset]
            if kind is AcknowledgeType.RENEW:
                renewed.append(offset)
                continue
            self._unlock(record)
            if kind is AcknowledgeType.ACCEPT:
                record.state = RecordState.ACKNOWLEDGED
            elif kind is AcknowledgeType.RELEASE:
                released |= self._make_available(record)
            else:  # REJECT, GAP
                record.state = RecordState.ARCHIVED
        self._renew(member_id, renewed, lock_duration_ms)
        self._advance_start()
        return released

    def _renew(self, member_id: str, offsets: list[int], lock_duration_ms: int) -> None:
        """New locks (a full duration from now) over the renewed offsets, one per run."""
        run: list[int] = []
        for offset in [*offsets, -1]:
            if run and offset != run[-1] + 1:
                lock = AcquisitionLock(lock_duration_ms, run[0], run[-1], member_id, self._expire)
                for renewed in run:
                    record = self._records[renewed]
                    self._unlock(record)
                    record.lock = lock
                self._timer.add(lock)
                run = []
            run.append(offset)

    def release_member(self, member_id: str) -> bool:
        """Give back every record ``member_id`` holds (its session closed or it left the
        group); True if records became available."""
        released = False
        for offset in range(self.start_offset, self.end_offset):
            record = self._records[offset]
            lock = record.lock
            if (
                record.state is RecordState.ACQUIRED
                and lock is not None
                and lock.member_id == member_id
            ):
                self._unlock(record)
                released |= self._make_available(record)
        self._advance_start()
        return released

    def skip_to(self, offset: int) -> None:
        """The log no longer has the records before ``offset`` (retention, DeleteRecords):
        archive what is in flight below it and start there."""
        for missing in range(self.start_offset, min(offset, self.end_offset)):
            record = self._records[missing]
            if record.state is RecordState.AVAILABLE:
                self._available -= 1
            self._unlock(record)
            record.state = RecordState.ARCHIVED
        if offset > self.end_offset:
            self._archive_gap(offset)
        self._advance_start()

    def release_all(self) -> None:
        """Cancel every lock (the share-partition is being dropped)."""
        for record in self._records.values():
            if record.lock is not None:
                record.lock.cancel()
                record.lock = None

    # -- expiry -----------------------------------------------------------------------

    def _expire(self, lock: AcquisitionLock) -> None:
        """``lock`` fired: its records still acquired under it are given back."""
        released = False
        for offset in range(max(lock.first_offset, self.start_offset), lock.last_offset + 1):
            record = self._records.get(offset)
            if record is not None and record.lock is lock:
                record.lock = None
                released |= self._make_available(record)
        self._advance_start()
        self._on_change(self, released)

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def _unlock(record: _Record) -> None:
        lock = record.lock
        if lock is not None:
            record.lock = None
            lock.release_one()

    def _make_available(self, record: _Record) -> bool:
        """An acquired record goes back: AVAILABLE, or ARCHIVED at the delivery limit."""
        if record.delivery_count >= self._delivery_count_limit:
            record.state = RecordState.ARCHIVED
            return False
        record.state = RecordState.AVAILABLE
        self._available += 1
        return True

    def _advance_start(self) -> None:
        """Move the SPSO past the acknowledged and archived prefix."""
        records = self._records
        start = self.start_offset
        while start < self.end_offset and records[start].state in _DONE:
            del records[start]
            start += 1
        self.start_offset = start

    def __repr__(self) -> str:
        return (
            f"<SharePartition {self.key} spso={self.start_offset} speo={self.end_offset} "
            f"available={self._available}>"
        )
