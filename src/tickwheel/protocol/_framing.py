"""Kafka's framing: a 4-byte big-endian size, then the request or response.

Sans-IO: these functions look at bytes the server has already read and decide what
the next read must be. Every request header version starts with the API key, the
API version and the correlation id (bytes 0-7 after the size), so they can be read
before the schema is known; that is what lets the server close a bad connection with
a log line naming the request, and answer ApiVersions at a version it cannot decode.

Stateless; safe from any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tickwheel.protocol._errors import FrameTooLargeError, MalformedFrameError

SIZE_PREFIX_BYTES = 4
# api_key int16, api_version int16, correlation_id int32: common to request headers v1/v2.
_HEADER_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
MIN_REQUEST_FRAME_BYTES = _HEADER_PREFIX.size


@dataclass(frozen=True, slots=True)
class RequestKey:
    """The fixed start of every request header."""

    api_key: int
    api_version: int
    correlation_id: int


def read_frame_size(prefix: bytes, max_frame_bytes: int) -> int:
    """The size of the frame announced by ``prefix``; raises if it is out of bounds."""
    size: int = _SIZE.unpack(prefix)[0]
    if size < MIN_REQUEST_FRAME_BYTES:
        raise MalformedFrameError(f"frame of {size} bytes is shorter than a request header")
    if size > max_frame_bytes:
        raise FrameTooLargeError(
            f"frame of {size} bytes exceeds socket.request.max.bytes={max_frame_bytes}"
        )
    return size


def peek_request_key(frame: bytes | memoryview) -> RequestKey:
    """The API key, version and correlation id at the start of a request frame."""
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
    return RequestKey(api_key, api_version, correlation_id)


def size_prefix(length: int) -> bytes:
    """The 4-byte prefix for a frame of ``length`` bytes."""
    return _SIZE.pack(length)
