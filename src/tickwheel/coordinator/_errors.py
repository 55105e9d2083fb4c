"""The coordinator's one error type, and what a failed state append means to a client.

Request-level failures are not exceptions: they travel to the client as Kafka error
codes (``kio.schema.errors.ErrorCode``) in the response. Exceptions are for what a
request cannot explain: an unreadable ``__consumer_offsets`` record, found while loading.
``coordinator_append_error`` maps the error of an append to a coordinator's own topic
(``__transaction_state``, ``__share_group_state``) to the one its client hears.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class CoordinatorError(Exception):
    """Base of the coordinator's exceptions; carries the Kafka error code it maps to."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class CorruptOffsetsRecordError(CoordinatorError):
    """A ``__consumer_offsets`` record or batch does not decode (Kafka's CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message


_TO_COORDINATOR_NOT_AVAILABLE = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    }
)
_TO_NOT_COORDINATOR = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error})
_TO_UNKNOWN_SERVER_ERROR = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large})


def coordinator_append_error(append_error: ErrorCode) -> ErrorCode:
    """A coordinator's answer for an append to its state topic that failed so (Kafka's
    transaction and share coordinators map them alike)."""
    if append_error in _TO_COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.coordinator_not_available
    if append_error in _TO_NOT_COORDINATOR:
        return ErrorCode.not_coordinator
    if append_error in _TO_UNKNOWN_SERVER_ERROR:
        return ErrorCode.unknown_server_error
    return append_error
