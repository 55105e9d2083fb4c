"""The errors Kafka can answer to the APIs clients recover through, and where each sits.

``INJECTABLE`` lists, per API, every error code Apache Kafka documents as a possible
answer (the ``Possible error codes`` of its ``*Response.java``; JoinGroup and SyncGroup
document none there, so theirs are what ``GroupCoordinatorService`` and
``GroupMetadataManager`` answer), and where the answer carries it: on each partition,
on each topic (Metadata), on each coordinator key (FindCoordinator v4+) or at the top.
A fault rule can inject any of them; ``tests/faults/test_injectable_errors.py`` injects
each into a real broker and reads the answer off the wire, and docs/testing.md shows
``injectable_errors_table()``, so the list, the test and the table cannot part.

``FETCH_SESSION_ERRORS`` are the Fetch errors that are the request's (its fetch session,
KIP-227), answered at the top even though Fetch has partitions; the plan answers them
so.

Immutable; safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from tickwheel.faults._rules import api_name, parse_error
from tickwheel.protocol import ApiKey


class ErrorPlace(enum.StrEnum):
    """Where an answer carries an error."""

    PARTITION = "each partition"
    TOPIC = "each topic"
    COORDINATOR_KEY = "each coordinator key"
    TOP_LEVEL = "top level"


@dataclass(frozen=True, slots=True)
class InjectableApi:
    """One API: the errors Kafka answers to it, where (at ``version``; None: the newest
    the broker serves), and those answered at the top instead (``request_wide``)."""

    api: ApiKey
    place: ErrorPlace
    errors: tuple[ErrorCode, ...]
    version: int | None = None
    request_wide: frozenset[ErrorCode] = frozenset()
    note: str = ""

    def place_of(self, error: ErrorCode) -> ErrorPlace:
        """Where the answer to this API carries ``error``."""
        return ErrorPlace.TOP_LEVEL if error in self.request_wide else self.place


def _errors(names: Iterable[str]) -> tuple[ErrorCode, ...]:
    return tuple(parse_error(name) for name in names)


_COORDINATOR: Final = (
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_COORDINATOR",
)

FETCH_SESSION_ERRORS: Final = frozenset(
    _errors(
        (
            "FETCH_SESSION_ID_NOT_FOUND",
            "INVALID_FETCH_SESSION_EPOCH",
            "FETCH_SESSION_TOPIC_ID_ERROR",
        )
    )
)
"""Fetch errors that are the request's (its session), never a partition's."""

INJECTABLE: Final = (
    InjectableApi(
        ApiKey.PRODUCE,
        ErrorPlace.PARTITION,
        _errors(
            (
                "CORRUPT_MESSAGE",
                "UNKNOWN_TOPIC_OR_PARTITION",
                "NOT_LEADER_OR_FOLLOWER",
                "MESSAGE_TOO_LARGE",
                "INVALID_TOPIC_EXCEPTION",
                "RECORD_LIST_TOO_LARGE",
                "NOT_ENOUGH_REPLICAS",
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                "INVALID_REQUIRED_ACKS",
                "TOPIC_AUTHORIZATION_FAILED",
                "UNSUPPORTED_FOR_MESSAGE_FORMAT",
                "INVALID_PRODUCER_EPOCH",
                "CLUSTER_AUTHORIZATION_FAILED",
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                "INVALID_RECORD",
                "INVALID_TXN_STATE",
                "INVALID_PRODUCER_ID_MAPPING",
                "KAFKA_STORAGE_ERROR",
                "TRANSACTION_ABORTABLE",
            )
        ),
        note="NOT_LEADER_OR_FOLLOWER carries the leader hint (v10+)",
    ),
    InjectableApi(
        ApiKey.FETCH,
        ErrorPlace.PARTITION,
        _errors(
            (
                "OFFSET_OUT_OF_RANGE",
                "TOPIC_AUTHORIZATION_FAILED",
                "REPLICA_NOT_AVAILABLE",
                "NOT_LEADER_OR_FOLLOWER",
                "FENCED_LEADER_EPOCH",
                "UNKNOWN_LEADER_EPOCH",
                "UNKNOWN_TOPIC_OR_PARTITION",
                "KAFKA_STORAGE_ERROR",
                "UNSUPPORTED_COMPRESSION_TYPE",
                "CORRUPT_MESSAGE",
                "UNKNOWN_TOPIC_ID",
                "INCONSISTENT_TOPIC_ID",
                "UNKNOWN_SERVER_ERROR",
                "FETCH_SESSION_ID_NOT_FOUND",
                "INVALID_FETCH_SESSION_EPOCH",
                "FETCH_SESSION_TOPIC_ID_ERROR",
            )
        ),
        request_wide=FETCH_SESSION_ERRORS,
        note="fetch-session errors at the top; leader errors carry the leader hint (v12+)",
    ),
    InjectableApi(
        ApiKey.METADATA,
        ErrorPlace.TOPIC,
        _errors(
            (
                "UNKNOWN_TOPIC_OR_PARTITION",
                "LEADER_NOT_AVAILABLE",
                "INVALID_TOPIC_EXCEPTION",
                "TOPIC_AUTHORIZATION_FAILED",
            )
        ),
        note="its partitions emptied, the brokers still listed",
    ),
    InjectableApi(
        ApiKey.FIND_COORDINATOR,
        ErrorPlace.COORDINATOR_KEY,
        _errors(
            (
                "COORDINATOR_LOAD_IN_PROGRESS",
                "COORDINATOR_NOT_AVAILABLE",
                "GROUP_AUTHORIZATION_FAILED",
                "INVALID_REQUEST",
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            )
        ),
        note="top level before v4",
    ),
    InjectableApi(
        ApiKey.JOIN_GROUP,
        ErrorPlace.TOP_LEVEL,
        _errors(
            (
                *_COORDINATOR,
                "GROUP_AUTHORIZATION_FAILED",
                "INVALID_GROUP_ID",
                "INVALID_SESSION_TIMEOUT",
                "INCONSISTENT_GROUP_PROTOCOL",
                "UNKNOWN_MEMBER_ID",
                "MEMBER_ID_REQUIRED",
                "GROUP_MAX_SIZE_REACHED",
                "FENCED_INSTANCE_ID",
                "REBALANCE_IN_PROGRESS",
            )
        ),
    ),
    InjectableApi(
        ApiKey.SYNC_GROUP,
        ErrorPlace.TOP_LEVEL,
        _errors(
            (
                *_COORDINATOR,
                "GROUP_AUTHORIZATION_FAILED",
                "INVALID_GROUP_ID",
                "UNKNOWN_MEMBER_ID",
                "ILLEGAL_GENERATION",
                "REBALANCE_IN_PROGRESS",
                "INCONSISTENT_GROUP_PROTOCOL",
                "FENCED_INSTANCE_ID",
            )
        ),
    ),
    InjectableApi(
        ApiKey.HEARTBEAT,
        ErrorPlace.TOP_LEVEL,
        _errors(
            (
                *_COORDINATOR,
                "ILLEGAL_GENERATION",
                "UNKNOWN_MEMBER_ID",
                "REBALANCE_IN_PROGRESS",
                "GROUP_AUTHORIZATION_FAILED",
            )
        ),
    ),
    InjectableApi(
        ApiKey.OFFSET_COMMIT,
        ErrorPlace.PARTITION,
        _errors(
            (
                "UNKNOWN_TOPIC_OR_PARTITION",
                "REQUEST_TIMED_OUT",
                "OFFSET_METADATA_TOO_LARGE",
                *_COORDINATOR,
                "ILLEGAL_GENERATION",
                "UNKNOWN_MEMBER_ID",
                "REBALANCE_IN_PROGRESS",
                "INVALID_COMMIT_OFFSET_SIZE",
                "TOPIC_AUTHORIZATION_FAILED",
                "GROUP_AUTHORIZATION_FAILED",
                "INVALID_PRODUCER_ID_MAPPING",
                "INVALID_TXN_STATE",
                "GROUP_ID_NOT_FOUND",
                "STALE_MEMBER_EPOCH",
            )
        ),
    ),
    InjectableApi(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ErrorPlace.TOP_LEVEL,
        _errors(
            (
                "GROUP_AUTHORIZATION_FAILED",
                *_COORDINATOR,
                "INVALID_REQUEST",
                "UNKNOWN_MEMBER_ID",
                "FENCED_MEMBER_EPOCH",
                "UNSUPPORTED_ASSIGNOR",
                "UNRELEASED_INSTANCE_ID",
                "GROUP_MAX_SIZE_REACHED",
                "INVALID_REGULAR_EXPRESSION",
            )
        ),
    ),
    InjectableApi(
        ApiKey.INIT_PRODUCER_ID,
        ErrorPlace.TOP_LEVEL,
        _errors(
            (
                *_COORDINATOR,
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                "CLUSTER_AUTHORIZATION_FAILED",
                "INVALID_PRODUCER_EPOCH",
                "PRODUCER_FENCED",
            )
        ),
        note="no producer id or epoch",
    ),
    InjectableApi(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ErrorPlace.PARTITION,
        _errors(
            (
                *_COORDINATOR,
                "INVALID_TXN_STATE",
                "INVALID_PRODUCER_ID_MAPPING",
                "INVALID_PRODUCER_EPOCH",
                "PRODUCER_FENCED",
                "TOPIC_AUTHORIZATION_FAILED",
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                "UNKNOWN_TOPIC_OR_PARTITION",
            )
        ),
        version=3,
        note="at v3, a producer's; top level from v4 (brokers' batches, KIP-890)",
    ),
    InjectableApi(
        ApiKey.END_TXN,
        ErrorPlace.TOP_LEVEL,
        _errors(
            (
                *_COORDINATOR,
                "INVALID_TXN_STATE",
                "INVALID_PRODUCER_ID_MAPPING",
                "INVALID_PRODUCER_EPOCH",
                "PRODUCER_FENCED",
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            )
        ),
    ),
)
"""Every API whose errors can be injected, with Kafka's errors for it."""


def injectable_errors_table() -> str:
    """``INJECTABLE`` as a Markdown table: API, where the error sits, the errors."""
    lines = ["| API | Where the answer carries it | Errors |", "| --- | --- | --- |"]
    for entry in INJECTABLE:
        where = f"{entry.place}; {entry.note}" if entry.note else str(entry.place)
        errors = ", ".join(error.name.upper() for error in entry.errors)
        lines.append(f"| {api_name(entry.api)} | {where} | {errors} |")
    return "\n".join(lines) + "\n"
