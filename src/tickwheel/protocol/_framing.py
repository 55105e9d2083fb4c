"""Kafka's framing: a 4-byte big-endian size, then the request or response.

Sans-IO: these functions look at bytes the server has already read and decide what
the next read must be. Every request header version starts with the API key, the
API version and the correlation id (bytes 0-7 after the size), so they can be read
before the schema is known; that is what lets the server close a bad connection with
a log line naming the request, and answer ApiVersions at a version it cannot decode.

A client configured for SSL that connects to a PLAINTEXT listener sends a TLS record
first: content type 22 (handshake), then version 3.x. Read as a size, those bytes
announce about 369 MB, more than ``socket.request.max.bytes`` allows; before saying
"too large", ``read_frame_size`` looks whether they are such a record and says so.

Stateless; safe from any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tickwheel.protocol._errors import FrameTooLargeError, MalformedFrameError, TlsHandshakeError

SIZE_PREFIX_BYTES = 4
# api_key int16, api_version int16, correlation_id int32: common to request headers v1/v2.
_HEADER_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
MIN_REQUEST_FRAME_BYTES = _HEADER_PREFIX.size
_TLS_HANDSHAKE_RECORD = 0x16
_TLS_MAJOR_VERSION = 0x03
_TLS_MAX_MINOR_VERSION = 0x04  # SSL 3.0 is 3.0, TLS 1.0-1.3 are 3.1-3.4


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
        if _is_tls_handshake(prefix):
            raise TlsHandshakeError(
                f"a TLS handshake record (0x{prefix[:3].hex()}), not a Kafka request"
            )
        raise FrameTooLargeError(
            f"frame of {size} bytes exceeds socket.request.max.bytes={max_frame_bytes}"
        )
    return size


def _is_tls_handshake(prefix: bytes) -> bool:
    """Whether ``prefix`` starts like a TLS handshake record (a ClientHello)."""
    return (
        len(prefix) >= 3
        and prefix[0] == _TLS_HANDSHAKE_RECORD
        and prefix[1] == _TLS_MAJOR_VERSION
        and prefix[2] <= _TLS_MAX_MINOR_VERSION
    )


def peek_request_key(frame: bytes | memoryview) -> RequestKey:
    """The API key, version and correlation id at the start of a request frame."""
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
    return RequestKey(api_key, api_version, correlation_id)


def uvarint(value: int) -> bytes:
    """``value`` (non-negative) as an unsigned varint, the lengths of flexible versions."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def size_prefix(length: int) -> bytes:
    """The 4-byte prefix for a frame of ``length`` bytes."""
    return _SIZE.pack(length)
