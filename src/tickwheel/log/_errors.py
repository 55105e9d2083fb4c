"""The log's one error type, ``LogError``, and its subclasses, each carrying Kafka's code.

A subclass exists for each Kafka error a client or the broker can get from the log, so
the broker answers with ``error.error_code`` without a mapping table of its own.

Concurrency: exceptions are immutable values; any thread may raise or read them.
"""

from __future__ import annotations

from typing import ClassVar

UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
KAFKA_STORAGE_ERROR = 56
INVALID_RECORD = 87


class LogError(Exception):
    """Base of every error the log raises; ``error_code`` is Kafka's numeric error code."""

    error_code: ClassVar[int] = UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    """A read or a DeleteRecords offset outside the log's bounds (OFFSET_OUT_OF_RANGE)."""

    error_code = OFFSET_OUT_OF_RANGE


class CorruptRecordError(LogError):
    """A batch whose framing, magic or CRC is wrong (CORRUPT_MESSAGE)."""

    error_code = CORRUPT_MESSAGE


class RecordTooLargeError(LogError):
    """A batch larger than ``max.message.bytes`` (MESSAGE_TOO_LARGE)."""

    error_code = MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(LogError):
    """A produce payload larger than a whole segment (RECORD_LIST_TOO_LARGE)."""

    error_code = RECORD_LIST_TOO_LARGE


class InvalidRecordError(LogError):
    """A well-framed batch that breaks a rule of the format (INVALID_RECORD)."""

    error_code = INVALID_RECORD


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
