"""``with_throttle_time``: a response frame whose ``throttle_time_ms`` says at least so long.

Kafka sets a response's ``throttle_time_ms`` when it sends it, to the longer of the
API's own throttle (a byte rate, a mutation rate) and the request-time quota's, which
is only known once the handler is done. Here the handler has encoded its answer by then,
so the field is rewritten in the frame, where the schema puts it:

- first in the body, in nearly every API (from the version that has it): right after
  the response header (4 bytes, and 1 more for the empty tagged fields of header v1);
- last in Produce's body (``encode_produce_response``), before v9's empty tagged fields;
  from v10 the tagged fields after it may hold the leader hints' ``node_endpoints``, so
  there the frame is decoded and written again (only a throttled answer pays for it);
- Fetch's frame (chunks: size prefix, then header and fixed fields) has it first too.

An API whose response has no ``throttle_time_ms`` at that version (SaslHandshake,
ApiVersions v0) is left as it is; ApiVersions, whose field comes after its key table, is
never throttled this way (Kafka exempts it).

Pure functions, cached per (API, version); safe from any thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
from typing import Any, Final

from kio.static.primitive import i32Timedelta

from tickwheel.protocol._api_keys import ApiKey
from tickwheel.protocol._codec import encode_response, uses_flexible_header
from tickwheel.protocol._fetch import FetchResponseFrame
from tickwheel.protocol._framing import SIZE_PREFIX_BYTES
from tickwheel.protocol._schemas import reader_for, response_schema

_INT32 = struct.Struct(">i")
_THROTTLE_FIELD: Final = "throttle_time"
_HEADER_V0_BYTES: Final = 4
_HEADER_V1_BYTES: Final = 5
_EMPTY_TAGGED_FIELDS_BYTES: Final = 1
_FIRST_HINTED_PRODUCE_VERSION: Final = 10


@functools.cache
def _first_field_offset(api_key: int, api_version: int) -> int | None:
    """Where the body's first field starts in the frame, if it is ``throttle_time_ms``."""
    cls = response_schema(api_key, api_version)
    fields = dataclasses.fields(cls)
    if not fields or fields[0].name != _THROTTLE_FIELD:
        return None
    header_bytes = _HEADER_V1_BYTES if uses_flexible_header(cls) else _HEADER_V0_BYTES
    return SIZE_PREFIX_BYTES + header_bytes


@functools.cache
def _last_field_end(api_key: int, api_version: int) -> int:
    """How far from the frame's end the body's last field (Produce's throttle) starts."""
    flexible = bool(response_schema(api_key, api_version).__flexible__)
    return _INT32.size + (_EMPTY_TAGGED_FIELDS_BYTES if flexible else 0)


def _raised(data: bytes, offset: int, throttle_ms: int) -> bytes:
    if len(data) < offset + _INT32.size:
        return data
    (current,) = _INT32.unpack_from(data, offset)
    if current >= throttle_ms:
        return data
    return data[:offset] + _INT32.pack(throttle_ms) + data[offset + _INT32.size :]


def _produce_raised(frame: bytes, api_version: int, throttle_ms: int) -> bytes:
    """A Produce v10+ frame with its throttle raised, decoded and written again."""
    cls = response_schema(ApiKey.PRODUCE, api_version)
    body: Any
    body, _ = reader_for(cls)(frame, SIZE_PREFIX_BYTES + _HEADER_V1_BYTES)
    throttle = datetime.timedelta(milliseconds=throttle_ms)
    if body.throttle_time >= throttle:
        return frame
    (correlation_id,) = _INT32.unpack_from(frame, SIZE_PREFIX_BYTES)
    raised = dataclasses.replace(body, throttle_time=i32Timedelta.parse(throttle))
    return encode_response(correlation_id, raised)


def with_throttle_time(
    frame: bytes | FetchResponseFrame, api_key: int, api_version: int, throttle_ms: int
) -> bytes | FetchResponseFrame:
    """``frame`` with ``throttle_time_ms`` at least ``throttle_ms`` (as it is when it has
    no such field, or already says as long)."""
    if api_key == ApiKey.PRODUCE and isinstance(frame, bytes):
        if api_version >= _FIRST_HINTED_PRODUCE_VERSION:
            return _produce_raised(frame, api_version, throttle_ms)
        return _raised(frame, len(frame) - _last_field_end(api_key, api_version), throttle_ms)
    offset = _first_field_offset(api_key, api_version)
    if offset is None:
        return frame
    if isinstance(frame, bytes):
        return _raised(frame, offset, throttle_ms)
    prefix, head, *rest = frame.chunks
    if not isinstance(head, bytes):
        return frame
    raised = _raised(head, offset - SIZE_PREFIX_BYTES, throttle_ms)
    return FetchResponseFrame(chunks=[prefix, raised, *rest], total_bytes=frame.total_bytes)
