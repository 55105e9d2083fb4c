"""Producer state: per producer id, its epoch, last five batches and open transaction.

Kafka's rules (``ProducerStateManager``/``ProducerAppendInfo``), applied by a leader to
every batch that carries a producer id, before anything is written:

- a batch whose epoch and sequence range equal one of the producer's last
  ``NUM_BATCHES_TO_RETAIN`` batches is a retry: the append returns the offsets that
  batch got the first time and writes nothing;
- an epoch older than the producer's current one is INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0 (unless the producer is unknown);
- within an epoch, the batch must start right after the last sequence (wrapping at
  2^31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER;
- an unknown producer (never seen, or its batches gone with retention) may start at any
  sequence, as in Kafka.

Those sequence rules apply to CLIENT appends only (``AppendOrigin``): the group and
transaction coordinators (COORDINATOR) write TxnOffsetCommit batches that all carry
sequence 0 and markers with sequence -1, and followers and recovery (REPLICATION) only
record what the log holds. Transactions (``SL/ProducerAppendInfo.java``):

- a transactional data batch from a producer with no open transaction opens one at
  its first offset (``ongoing``, keyed by that offset: transactions open in offset
  order, so the dict iterates in offset order);
- a non-transactional batch from a producer with an open transaction is
  INVALID_TXN_STATE;
- a marker (control batch, COORDINATOR or REPLICATION only) with an older producer
  epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch than the last
  marker's TRANSACTION_COORDINATOR_FENCED (a follower accepts both); it completes the
  open transaction, if any (a resent marker completes nothing), and moves it to
  ``unreplicated`` until the high watermark passes the marker. An ABORT yields the
  ``AbortedTxn`` entry for the segment's ``.txnindex``, with the LSO right after it.

Verification (KIP-890 part 1, Kafka's ``VerificationGuard``): before a client's
transactional batch that would open a transaction is appended, the partition leader
asks the transaction coordinator whether the partition is in the transaction
(``start_verification`` hands out the producer's guard, a unique token, or
``NO_VERIFICATION_GUARD`` when the producer's transaction is already open at that
epoch). The append names the guard it was verified with (``check``'s
``verification_guard``); a transactional batch that would open a transaction is
INVALID_TXN_STATE unless the guard is still the producer's. The guard is dropped when
the producer's transaction opens and when a marker is written for the producer, so a
produce verified before an abort and appended after it is refused rather than opening
a transaction no marker will close.

``first_unstable_offset`` is the first offset of the oldest open or unreplicated
transaction: the log's last stable offset is that offset when it is below the high
watermark, else the high watermark.

Persistence: ``snapshot``/``rebuild(..., snapshot)`` save and load the state in
Kafka's ``.snapshot`` entries (``_producer_snapshot``; each producer's last batch
only). On open, and after a truncation, the log loads the newest usable snapshot and
replays the batch headers (and each marker's record) after it; the replay also yields
the aborted transactions, from which the log rebuilds the ``.txnindex`` entries past
the snapshot. ``remove_expired`` forgets idle producers without an open transaction
after ``producer.id.expiration.ms``, and verification guards that old.

Concurrency: not thread-safe; the owning log's lock guards every call.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from tickwheel.log._errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from tickwheel.log._producer_snapshot import SnapshotEntry
from tickwheel.log._txn_index import AbortedTxn
from tickwheel.record import (
    CONTROL_FLAG_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    ControlType,
    EndTxnMarker,
)

NUM_BATCHES_TO_RETAIN: Final = 5
NO_TIMESTAMP_MS: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_OFFSET: Final = -1
NO_COORDINATOR_EPOCH: Final = -1
_MAX_SEQUENCE: Final = 2**31 - 1


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap after 2^31 - 1."""
    if base_sequence > _MAX_SEQUENCE - last_offset_delta:
        return last_offset_delta - (_MAX_SEQUENCE - base_sequence) - 1
    return base_sequence + last_offset_delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_SEQUENCE)


class AppendOrigin(enum.Enum):
    """Who appends: a producer, a coordinator of this broker, or replication/recovery."""

    CLIENT = enum.auto()
    COORDINATOR = enum.auto()
    REPLICATION = enum.auto()


class CompletedTxn(NamedTuple):
    """A transaction whose marker is written but maybe not yet below the high watermark."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ProducerStateSummary:
    """One producer as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


# (header, the marker of a control batch or None) for each batch of an append.
BatchAndMarker = tuple[BatchHeader, EndTxnMarker | None]


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one producer batch landed: its sequence range and offset range."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp_ms: int


class ProducerStateEntry:
    """One producer's epoch, last ``NUM_BATCHES_TO_RETAIN`` batches and open transaction."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = NO_COORDINATOR_EPOCH
        self.current_txn_first_offset = NO_OFFSET
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        """Sequence of the producer's last record, ``NO_SEQUENCE`` if none is retained."""
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def update_epoch(self, epoch: int) -> None:
        """Adopt a newer epoch: the retained batches belong to the old one."""
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()


class _Pending:
    """A producer's state as a payload's earlier batches leave it, during ``check``."""

    __slots__ = ("coordinator_epoch", "epoch", "last_seq", "txn_open")

    def __init__(self, epoch: int, last_seq: int, txn_open: bool, coordinator_epoch: int) -> None:
        self.epoch = epoch
        self.last_seq = last_seq
        self.txn_open = txn_open
        self.coordinator_epoch = coordinator_epoch

    @classmethod
    def of(cls, entry: ProducerStateEntry | None) -> _Pending:
        """The state ``entry`` records (an unknown producer's if None)."""
        if entry is None:
            return cls(NO_PRODUCER_EPOCH, NO_SEQUENCE, False, NO_COORDINATOR_EPOCH)
        return cls(
            entry.producer_epoch,
            entry.last_seq,
            entry.current_txn_first_offset >= 0,
            entry.coordinator_epoch,
        )


class VerificationGuard:
    """One verification of a producer's transaction on a partition: compared by identity.
    ``created_ms`` (the log's clock) lets a guard no append ever used expire."""

    __slots__ = ("created_ms",)

    def __init__(self, created_ms: int = NO_TIMESTAMP_MS) -> None:
        self.created_ms = created_ms


NO_VERIFICATION_GUARD: Final = VerificationGuard()
"""No verification needed when asked (the producer's transaction was open), so an
append with it may only continue an open transaction."""


class ProducerStateManager:
    """All producers of one partition log, and its open and unreplicated transactions."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # Producer id -> the guard of its verification in progress.
        self.verifications: dict[int, VerificationGuard] = {}
        # First offset -> producer id of every open transaction, in offset order.
        self.ongoing: dict[int, int] = {}
        # Completed transactions whose marker is not yet below the high watermark.
        self.unreplicated: list[CompletedTxn] = []

    def start_verification(
        self, producer_id: int, producer_epoch: int, now_ms: int
    ) -> VerificationGuard:
        """The producer's verification guard (created at ``now_ms`` if none), or
        ``NO_VERIFICATION_GUARD`` if its transaction is open at ``producer_epoch`` or
        the epoch is older than the producer's (the append refuses it without asking
        the coordinator, as Kafka does since KAFKA-18042)."""
        entry = self.producers.get(producer_id)
        if entry is not None and (
            producer_epoch < entry.producer_epoch
            or (entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch)
        ):
            return NO_VERIFICATION_GUARD
        guard = self.verifications.get(producer_id)
        if guard is None:
            guard = self.verifications[producer_id] = VerificationGuard(now_ms)
        return guard

    def check(
        self,
        batches: Sequence[BatchAndMarker],
        origin: AppendOrigin,
        verification_guard: VerificationGuard | None = None,
    ) -> BatchMetadata | None:
        """Validate a leader append's producer batches without changing any state.

        ``verification_guard`` None: the append was not verified (verification off, or
        not a client's produce). Returns the first append's metadata when a CLIENT
        batch is a retry; raises
        ``InvalidProducerEpochError``, ``OutOfOrderSequenceError``,
        ``InvalidTxnStateError`` or ``TransactionCoordinatorFencedError``.
        """
        if origin is AppendOrigin.REPLICATION:
            return None
        # Batches of one payload chain on each other before any is recorded.
        pending: dict[int, _Pending] = {}
        for header, marker in batches:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            epoch = header.producer_epoch
            state = pending.get(producer_id)
            if state is None:
                entry = self.producers.get(producer_id)
                if entry is not None and origin is AppendOrigin.CLIENT:
                    duplicate = entry.find_duplicate(
                        epoch,
                        header.base_sequence,
                        last_sequence(header.base_sequence, header.last_offset_delta),
                    )
                    if duplicate is not None:
                        return duplicate
                state = _Pending.of(entry)
                pending[producer_id] = state
            if epoch < state.epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id}: epoch {epoch} is older than {state.epoch}"
                )
            if header.attributes & CONTROL_FLAG_MASK:
                if marker is not None:
                    _check_marker(producer_id, epoch, marker, state)
                continue
            transactional = bool(header.attributes & TRANSACTIONAL_FLAG_MASK)
            if state.txn_open and not transactional:
                raise InvalidTxnStateError(
                    f"producer {producer_id}: a non-transactional batch while its "
                    "transaction is open"
                )
            if (
                transactional
                and not state.txn_open
                and verification_guard is not None
                and (
                    verification_guard is NO_VERIFICATION_GUARD
                    or self.verifications.get(producer_id) is not verification_guard
                )
            ):
                raise InvalidTxnStateError(
                    f"producer {producer_id}: record was not part of an ongoing transaction"
                )
            first_seq = header.base_sequence
            if origin is AppendOrigin.CLIENT:
                _check_sequence(producer_id, epoch, first_seq, state)
            state.txn_open = state.txn_open or transactional
            state.epoch = epoch
            state.last_seq = last_sequence(first_seq, header.last_offset_delta)
        return None

    def record(
        self,
        header: BatchHeader,
        first_offset: int,
        max_timestamp_ms: int,
        marker: EndTxnMarker | None = None,
    ) -> AbortedTxn | None:
        """Remember an appended producer batch (``header`` as written, any origin).

        For a marker that ends an open transaction, returns the ``.txnindex`` entry
        when it aborted it.
        """
        producer_id = header.producer_id
        epoch = header.producer_epoch
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        if header.attributes & CONTROL_FLAG_MASK:
            if marker is None:
                # An empty control batch: its transaction was cleaned away.
                return None
            self.verifications.pop(producer_id, None)
            entry.update_epoch(epoch)
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.last_timestamp = max_timestamp_ms
            txn_first = entry.current_txn_first_offset
            if txn_first < 0:
                return None
            entry.current_txn_first_offset = NO_OFFSET
            self.ongoing.pop(txn_first, None)
            self.unreplicated.append(CompletedTxn(producer_id, txn_first, first_offset))
            if marker.control_type is not ControlType.ABORT:
                return None
            last_stable = next(iter(self.ongoing), first_offset + 1)
            return AbortedTxn(producer_id, txn_first, first_offset, last_stable)
        if epoch < entry.producer_epoch:
            # Only a follower or recovery sees this; the leader refused it.
            return None
        entry.update_epoch(epoch)
        if header.attributes & TRANSACTIONAL_FLAG_MASK and entry.current_txn_first_offset < 0:
            self.verifications.pop(producer_id, None)
            entry.current_txn_first_offset = first_offset
            self.ongoing[first_offset] = producer_id
        first_seq = header.base_sequence
        entry.batches.append(
            BatchMetadata(
                first_seq,
                last_sequence(first_seq, header.last_offset_delta),
                first_offset,
                first_offset + header.last_offset_delta,
                max_timestamp_ms,
            )
        )
        entry.last_timestamp = max_timestamp_ms
        return None

    def rebuild(
        self,
        batches: Iterable[BatchAndMarker],
        high_watermark: int,
        snapshot: list[SnapshotEntry] | None = None,
    ) -> list[AbortedTxn]:
        """Forget everything, load ``snapshot`` if given, and replay the producer
        batches among ``batches`` (those after the snapshot).

        Returns every aborted transaction met, in marker order.
        """
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        if snapshot is not None:
            self._load(snapshot)
        aborted: list[AbortedTxn] = []
        for header, marker in batches:
            if header.producer_id >= 0:
                found = self.record(header, header.base_offset, header.max_timestamp, marker)
                if found is not None:
                    aborted.append(found)
                if len(self.unreplicated) > NUM_BATCHES_TO_RETAIN:
                    self.on_high_watermark(high_watermark)
        self.on_high_watermark(high_watermark)
        return aborted

    def _load(self, snapshot: list[SnapshotEntry]) -> None:
        open_txns: list[tuple[int, int]] = []
        for saved in snapshot:
            entry = ProducerStateEntry(saved.producer_id, saved.producer_epoch)
            entry.coordinator_epoch = saved.coordinator_epoch
            entry.last_timestamp = saved.timestamp
            entry.current_txn_first_offset = saved.current_txn_first_offset
            if saved.last_offset >= 0:
                entry.batches.append(
                    BatchMetadata(
                        _decrement_sequence(saved.last_sequence, saved.offset_delta),
                        saved.last_sequence,
                        saved.last_offset - saved.offset_delta,
                        saved.last_offset,
                        saved.timestamp,
                    )
                )
            if saved.current_txn_first_offset >= 0:
                open_txns.append((saved.current_txn_first_offset, saved.producer_id))
            self.producers[saved.producer_id] = entry
        for first_offset, producer_id in sorted(open_txns):
            self.ongoing[first_offset] = producer_id

    def snapshot(self) -> list[SnapshotEntry]:
        """Every producer as a snapshot keeps it (its last batch only)."""
        entries = []
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            entries.append(
                SnapshotEntry(
                    entry.producer_id,
                    entry.producer_epoch,
                    NO_SEQUENCE if last is None else last.last_seq,
                    NO_OFFSET if last is None else last.last_offset,
                    0 if last is None else last.last_offset - last.first_offset,
                    entry.last_timestamp,
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset,
                )
            )
        return entries

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open or unreplicated transaction, None if none."""
        first = next(iter(self.ongoing), None)
        for txn in self.unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below ``high_watermark``."""
        if self.unreplicated:
            self.unreplicated = [
                txn for txn in self.unreplicated if txn.last_offset >= high_watermark
            ]

    def on_log_start(self, log_start_offset: int) -> None:
        """The log start moved: completed transactions wholly below it are gone."""
        if self.unreplicated:
            self.unreplicated = [
                txn for txn in self.unreplicated if txn.last_offset >= log_start_offset
            ]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` without an open transaction, and
        verification guards as old that no append used (Kafka's rule)."""
        self.verifications = {
            producer_id: guard
            for producer_id, guard in self.verifications.items()
            if now_ms - guard.created_ms < expiration_ms
        }
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    def summaries(self) -> list[ProducerStateSummary]:
        """Every producer, as DescribeProducers reports it."""
        return [
            ProducerStateSummary(
                entry.producer_id,
                entry.producer_epoch,
                entry.last_seq,
                entry.last_timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )
            for entry in self.producers.values()
        ]


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` with sequences wrapping after 2^31 - 1."""
    if sequence < decrement:
        return _MAX_SEQUENCE - (decrement - sequence) + 1
    return sequence - decrement


def _check_marker(producer_id: int, epoch: int, marker: EndTxnMarker, state: _Pending) -> None:
    """Kafka's ``checkCoordinatorEpoch`` for a COORDINATOR marker; then apply it."""
    if state.coordinator_epoch > marker.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"producer {producer_id}: coordinator epoch {marker.coordinator_epoch} is "
            f"older than {state.coordinator_epoch}"
        )
    state.coordinator_epoch = marker.coordinator_epoch
    state.txn_open = False
    if epoch != state.epoch:
        state.epoch, state.last_seq = epoch, NO_SEQUENCE


def _check_sequence(producer_id: int, epoch: int, first_seq: int, state: _Pending) -> None:
    """Kafka's ``checkSequence`` for a CLIENT data batch."""
    if epoch != state.epoch:
        if first_seq != 0 and state.epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"producer {producer_id}: new epoch {epoch} starts at sequence {first_seq}, not 0"
            )
    elif not _in_sequence(state.last_seq, first_seq):
        # Also at an epoch a marker started (no sequence yet): it must begin at 0.
        raise OutOfOrderSequenceError(
            f"producer {producer_id}: sequence {first_seq} does not follow "
            f"{state.last_seq} (epoch {epoch})"
        )
