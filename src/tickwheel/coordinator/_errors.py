"""The coordinator's one error type.

Request-level failures are not exceptions: they travel to the client as Kafka error
codes (``kio.schema.errors.ErrorCode``) in the response. Exceptions are for what a
request cannot explain: an unreadable ``__consumer_offsets`` record, found while loading.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class CoordinatorError(Exception):
    """Base of the coordinator's exceptions; carries the Kafka error code it maps to."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class CorruptOffsetsRecordError(CoordinatorError):
    """A ``__consumer_offsets`` record or batch does not decode (Kafka's CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message
