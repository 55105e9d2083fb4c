"""Idempotent-producer state: per producer id, its epoch and its last five batches.

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

Followers and recovery only record what the log holds. The state is not persisted: on
open the log rebuilds it by reading every batch header (headers only), and after a
truncation it rebuilds it the same way, so it always agrees with the log.

Concurrency: not thread-safe; the owning log's lock guards every call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from tickwheel.log._batch import BatchHeader
from tickwheel.log._errors import InvalidProducerEpochError, OutOfOrderSequenceError

NUM_BATCHES_TO_RETAIN: Final = 5
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
_MAX_SEQUENCE: Final = 2**31 - 1


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap after 2^31 - 1."""
    if base_sequence > _MAX_SEQUENCE - last_offset_delta:
        return last_offset_delta - (_MAX_SEQUENCE - base_sequence) - 1
    return base_sequence + last_offset_delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_SEQUENCE)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one producer batch landed: its sequence range and offset range."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp_ms: int


class ProducerStateEntry:
    """One producer's epoch and its last ``NUM_BATCHES_TO_RETAIN`` batches."""

    __slots__ = ("batches", "producer_epoch", "producer_id")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

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


class ProducerStateManager:
    """All producers of one partition log."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

    def check(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Validate a leader append's idempotent batches without changing any state.

        Returns the first append's metadata when a batch is a retry; raises
        ``InvalidProducerEpochError`` or ``OutOfOrderSequenceError``.
        """
        # Batches of one payload chain on each other before any is recorded.
        pending: dict[int, tuple[int, int]] = {}
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            epoch = header.producer_epoch
            first_seq = header.base_sequence
            last_seq = last_sequence(first_seq, header.last_offset_delta)
            entry = self.producers.get(producer_id)
            if producer_id in pending:
                current_epoch, current_last_seq = pending[producer_id]
            elif entry is not None:
                duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return duplicate
                current_epoch, current_last_seq = entry.producer_epoch, entry.last_seq
            else:
                current_epoch, current_last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            if epoch < current_epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id}: epoch {epoch} is older than {current_epoch}"
                )
            if epoch != current_epoch:
                if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id}: new epoch {epoch} starts at sequence "
                        f"{first_seq}, not 0"
                    )
            elif current_last_seq != NO_SEQUENCE and not _in_sequence(current_last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"producer {producer_id}: sequence {first_seq} does not follow "
                    f"{current_last_seq} (epoch {epoch})"
                )
            pending[producer_id] = (epoch, last_seq)
        return None

    def record(self, header: BatchHeader, first_offset: int, max_timestamp_ms: int) -> None:
        """Remember an appended idempotent batch (``header`` as written, any origin)."""
        producer_id = header.producer_id
        epoch = header.producer_epoch
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.producer_epoch:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        elif epoch < entry.producer_epoch:
            return
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

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Forget everything and replay the idempotent batches among ``headers``."""
        self.producers.clear()
        for header in headers:
            if header.producer_id >= 0:
                self.record(header, header.base_offset, header.max_timestamp)
