"""The ProduceResponse, written by hand for the broker's hot path.

A producer with ``linger.ms=0`` (librdkafka's choice for low latency) sends one
Produce request per message while it can, so the broker's cost per request is what
bounds the rate it can acknowledge. kio's writers are Python: building its entity and
writing it would cost an order of magnitude more than the few µs ``struct`` takes.

``encode_produce_response`` writes the frame (size prefix, response header, body) from
plain tuples: the same bytes kio writes for the equivalent ProduceResponse entity
(v3-v4: index, error code, base offset, log append time; v5-v7 add the log start
offset; v8 adds the record errors, each a batch index and a nullable message, and the
error message; v9 is flexible: compact lengths, empty tagged-field sections and
response header v1; v10 adds the leader hints of KIP-951 as tagged fields, written only
for the partitions ``hints`` names, as ``_leader_hints`` tells). A partition without
record errors, the common case, costs one constant for them.
``tests/protocol/test_produce_response.py`` compares the bytes with kio's over
generated answers. (The request's own hot-path check is ``_request_checks``.)

Pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from tickwheel.protocol._framing import uvarint
from tickwheel.protocol._leader_hints import (
    NO_LEADER_HINTS,
    LeaderHints,
    current_leader_tag,
    node_endpoints_tag,
)

_FIRST_FLEXIBLE_VERSION: Final = 9
_FIRST_LOG_START_OFFSET_VERSION: Final = 5
_FIRST_ERROR_MESSAGE_VERSION: Final = 8
_FIRST_LEADER_HINT_VERSION: Final = 10
_CURRENT_LEADER_TAG: Final = 0
_NODE_ENDPOINTS_TAG: Final = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
# index, error code, base offset, log append time: every version.
_PARTITION_V3 = struct.Struct(">ihqq")
# ... and the log start offset (v5 on).
_PARTITION_V5 = struct.Struct(">ihqqq")
_EMPTY_TAGGED_FIELDS: Final = b"\x00"
_NULL_LEGACY_STRING: Final = _INT16.pack(-1)
_NULL_COMPACT_STRING: Final = b"\x00"
_EMPTY_LEGACY_ARRAY: Final = _INT32.pack(0)
_EMPTY_COMPACT_ARRAY: Final = b"\x01"
_NO_THROTTLE: Final = _INT32.pack(0)

RecordErrorAnswer = tuple[int, str | None]
"""One refused record: its position in its batch and why (None: no message)."""

PartitionAnswer = tuple[int, int, int, int, int, str | None, Sequence[RecordErrorAnswer]]
"""One partition's answer: index, error code, base offset, log append time in ms (-1:
none), log start offset, error message (None: none), record errors (v8+)."""

TopicAnswer = tuple[str, Sequence[PartitionAnswer]]
"""One topic's name and its partitions' answers, in the request's order."""


def _string(value: str, *, flexible: bool) -> bytes:
    encoded = value.encode()
    if flexible:
        return uvarint(len(encoded) + 1) + encoded
    return _INT16.pack(len(encoded)) + encoded


def _nullable_string(value: str | None, *, flexible: bool) -> bytes:
    if value is None:
        return _NULL_COMPACT_STRING if flexible else _NULL_LEGACY_STRING
    return _string(value, flexible=flexible)


def _array_length(count: int, *, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _INT32.pack(count)


def _record_errors(errors: Sequence[RecordErrorAnswer], *, flexible: bool) -> bytes:
    parts = [_array_length(len(errors), flexible=flexible)]
    for batch_index, message in errors:
        parts.append(_INT32.pack(batch_index))
        parts.append(_nullable_string(message, flexible=flexible))
        if flexible:
            parts.append(_EMPTY_TAGGED_FIELDS)
    return b"".join(parts)


def encode_produce_response(
    correlation_id: int,
    version: int,
    topics: Sequence[TopicAnswer],
    *,
    throttle_time_ms: int = 0,
    hints: LeaderHints = NO_LEADER_HINTS,
) -> bytes:
    """The ProduceResponse frame of ``version`` (3-12: v10-12 add only tagged fields, the
    leader ``hints``), size prefix included."""
    flexible = version >= _FIRST_FLEXIBLE_VERSION
    hinted = version >= _FIRST_LEADER_HINT_VERSION
    leaders = hints.leaders if hinted else {}
    with_error_message = version >= _FIRST_ERROR_MESSAGE_VERSION
    with_log_start = version >= _FIRST_LOG_START_OFFSET_VERSION
    no_record_errors = _EMPTY_COMPACT_ARRAY if flexible else _EMPTY_LEGACY_ARRAY
    parts: list[bytes] = [b"", _EMPTY_TAGGED_FIELDS] if flexible else [b""]
    parts.append(_array_length(len(topics), flexible=flexible))
    for name, partitions in topics:
        parts.append(_string(name, flexible=flexible))
        parts.append(_array_length(len(partitions), flexible=flexible))
        for (
            index,
            error_code,
            base_offset,
            append_time_ms,
            start_offset,
            message,
            record_errors,
        ) in partitions:
            if with_log_start:
                parts.append(
                    _PARTITION_V5.pack(index, error_code, base_offset, append_time_ms, start_offset)
                )
            else:
                parts.append(_PARTITION_V3.pack(index, error_code, base_offset, append_time_ms))
            if with_error_message:
                parts.append(
                    _record_errors(record_errors, flexible=flexible)
                    if record_errors
                    else no_record_errors
                )
                parts.append(_nullable_string(message, flexible=flexible))
            leader = leaders.get((name, index)) if leaders else None
            if leader is not None:
                parts.append(current_leader_tag(_CURRENT_LEADER_TAG, leader))
            elif flexible:
                parts.append(_EMPTY_TAGGED_FIELDS)
        if flexible:
            parts.append(_EMPTY_TAGGED_FIELDS)
    parts.append(_INT32.pack(throttle_time_ms) if throttle_time_ms else _NO_THROTTLE)
    if hinted and hints.endpoints:
        parts.append(node_endpoints_tag(_NODE_ENDPOINTS_TAG, hints.endpoints))
    elif flexible:
        parts.append(_EMPTY_TAGGED_FIELDS)
    body_bytes = sum(map(len, parts))
    parts[0] = _SIZE_AND_CORRELATION.pack(body_bytes + _INT32.size, correlation_id)
    return b"".join(parts)
