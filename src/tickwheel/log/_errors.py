"""The log's one error type, ``LogError``, and its subclasses, each carrying Kafka's code.

A subclass exists for each Kafka error a client or the broker can get from the log, so
the broker answers with ``error.error_code`` without a mapping table of its own.
``LogError`` is the record format's ``RecordError`` (``tickwheel.record``), and the
format's ``CorruptRecordError`` and ``InvalidRecordError`` are the log's: one
hierarchy, so ``except LogError`` also catches a bad batch the format code found.

Concurrency: exceptions are immutable values; any thread may raise or read them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.record import CorruptRecordError, InvalidRecordError
from tickwheel.record import RecordError as LogError

__all__ = [
    "CorruptRecordError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTxnStateError",
    "LogError",
    "LogStorageError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "RecordValidationError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
]

OFFSET_OUT_OF_RANGE = 1
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
KAFKA_STORAGE_ERROR = 56


class OffsetOutOfRangeError(LogError):
    """A read or a DeleteRecords offset outside the log's bounds (OFFSET_OUT_OF_RANGE)."""

    error_code = OFFSET_OUT_OF_RANGE


class RecordTooLargeError(LogError):
    """A batch larger than ``max.message.bytes`` (MESSAGE_TOO_LARGE)."""

    error_code = MESSAGE_TOO_LARGE


class RecordValidationError(InvalidRecordError):
    """Records of a batch that break a per-record rule (Kafka's ``RecordValidationException``).

    INVALID_RECORD, with ``record_errors``: each bad record's position in its batch and
    why; the message is Kafka's summary, showing the first three.
    """

    def __init__(self, record_errors: Sequence[tuple[int, str]]) -> None:
        self.record_errors = tuple(record_errors)
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')"
            for index, message in self.record_errors[:3]
        )
        super().__init__(
            f"One or more records have been rejected due to {len(self.record_errors)} record "
            f"errors in total, and only showing the first three errors at most: [{shown}]"
        )


class RecordBatchTooLargeError(LogError):
    """A produce payload larger than a whole segment (RECORD_LIST_TOO_LARGE)."""

    error_code = RECORD_LIST_TOO_LARGE


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch that leaves a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_code = OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch from a producer epoch older than the current one (INVALID_PRODUCER_EPOCH)."""

    error_code = INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    """A non-transactional batch from a producer with an open transaction (INVALID_TXN_STATE)."""

    error_code = INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    """A marker from an older coordinator epoch than the producer's last marker.

    TRANSACTION_COORDINATOR_FENCED.
    """

    error_code = TRANSACTION_COORDINATOR_FENCED


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose offsets do not follow the log end.

    ``first_offset``/``last_offset`` are the offending batch's. As in Kafka, a replica
    that sees a batch straddling its log end right after ``truncate_fully_and_start_at``
    (the leader's log start fell inside a batch) restarts its log at ``first_offset``.
    """

    def __init__(self, message: str, *, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class LogStorageError(LogError):
    """The file system failed under the log, or the log is closed (KAFKA_STORAGE_ERROR)."""

    error_code = KAFKA_STORAGE_ERROR
