"""The record format's errors, each carrying Kafka's error code.

``RecordError`` is the base of every error a batch or record can raise, and the base of
the log's errors too (``tickwheel.log.LogError`` is this class): a caller that catches
the log's errors also catches a corrupt batch found while taking it apart, and answers
with ``error.error_code`` without a mapping table of its own.

Concurrency: exceptions are immutable values; any thread may raise or read them.
"""

from __future__ import annotations

from typing import ClassVar, Final

UNKNOWN_SERVER_ERROR: Final = -1
CORRUPT_MESSAGE: Final = 2
INVALID_RECORD: Final = 87


class RecordError(Exception):
    """Base of the record format's and the log's errors; ``error_code`` is Kafka's code."""

    error_code: ClassVar[int] = UNKNOWN_SERVER_ERROR


class CorruptRecordError(RecordError):
    """A batch whose framing, magic or CRC is wrong, or whose records do not parse.

    CORRUPT_MESSAGE.
    """

    error_code = CORRUPT_MESSAGE


class InvalidRecordError(RecordError):
    """A well-framed batch that breaks a rule of the format (INVALID_RECORD)."""

    error_code = INVALID_RECORD
