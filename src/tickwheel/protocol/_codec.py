"""Decode request frames and encode response frames with kio.

Sans-IO, in the manner of h11: ``decode_request`` takes the bytes of one frame (after
its size prefix) and returns the kio header and body; ``encode_response`` returns the
bytes of one response frame, size prefix included. Which API keys and versions are
acceptable is the caller's table (the broker advertises what it handles), so this
module knows nothing of handlers.

Response headers are written by hand: v0 is the correlation id, v1 adds an empty
tagged-field section; kio's encoder is used for bodies. kio never writes a tagged
field that holds its default value, which old librdkafka (before 2.2) cannot skip.

Stateless apart from the schema caches; safe from any thread.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity, RequestHeader, RequestPayload, ResponsePayload

from tickwheel.protocol._build import build_entity
from tickwheel.protocol._errors import (
    UndecodableRequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from tickwheel.protocol._framing import peek_request_key, size_prefix
from tickwheel.protocol._schemas import reader_for, request_schema, response_schema, writer_for

API_VERSIONS_KEY = 18
# The response header of a flexible version carries a tagged-field section: empty.
_EMPTY_TAGGED_FIELDS = b"\x00"
_RESPONSE_HEADER_V0 = struct.Struct(">i")
_FRAME_WITH_HEADER_V0 = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of API versions."""

    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """One request: kio's header and body."""

    header: RequestHeader
    body: RequestPayload

    @property
    def api_key(self) -> int:
        """The request's API key."""
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        """The request's API version."""
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        """The id the response must echo."""
        return int(self.header.correlation_id)


def decode_request(frame: bytes, supported: Mapping[int, VersionRange]) -> DecodedRequest:
    """Decode one request frame whose API key and version are in ``supported``."""
    key = peek_request_key(frame)
    versions = supported.get(key.api_key)
    if versions is None:
        raise UnknownApiKeyError(f"api_key={key.api_key} is not supported")
    if key.api_version not in versions:
        raise UnsupportedVersionError(
            f"api_key={key.api_key} v{key.api_version} is not advertised "
            f"(supported {versions.min_version}-{versions.max_version})"
        )
    body_cls = request_schema(key.api_key, key.api_version)
    header_cls: type[Entity] = body_cls.__header_schema__
    # Any failure to decode untrusted bytes, whatever kio raises, means the same thing.
    try:
        header, header_size = reader_for(header_cls)(frame, 0)
        body, _ = reader_for(body_cls)(frame, header_size)
    except Exception as exc:
        raise UndecodableRequestError(
            f"api_key={key.api_key} v{key.api_version} does not decode: {exc!r}"
        ) from exc
    # Bytes after the body are ignored, as Kafka's generated readers do: librdkafka 2.16
    # ends its Metadata v12 request with three bytes the schema does not have.
    # The readers were chosen by ``body_cls`` and its own header schema, so they made these.
    return DecodedRequest(header=cast(RequestHeader, header), body=cast(RequestPayload, body))


def response_header_bytes(correlation_id: int, *, flexible_header: bool) -> bytes:
    """A response header: v1 (with tagged fields) when ``flexible_header``, else v0."""
    header = _RESPONSE_HEADER_V0.pack(correlation_id)
    return header + _EMPTY_TAGGED_FIELDS if flexible_header else header


def uses_flexible_header(response_cls: type[ResponsePayload]) -> bool:
    """Whether ``response_cls`` is sent with response header v1 (ApiVersions never is)."""
    return int(response_cls.__header_schema__.__version__) >= 1


def encode_response(correlation_id: int, response: ResponsePayload) -> bytes:
    """One response frame, size prefix included."""
    buffer = io.BytesIO()
    writer_for(type(response))(buffer, response)
    body = buffer.getvalue()
    header = response_header_bytes(
        correlation_id, flexible_header=uses_flexible_header(type(response))
    )
    return size_prefix(len(header) + len(body)) + header + body


def encode_api_versions_fallback(
    correlation_id: int, supported: Iterable[tuple[int, VersionRange]]
) -> bytes:
    """The v0 ApiVersions answer (error 35) to an ApiVersions request we cannot read."""
    response = build_entity(
        response_schema(API_VERSIONS_KEY, 0),
        {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": [
                {"api_key": key, "min_version": r.min_version, "max_version": r.max_version}
                for key, r in supported
            ],
        },
    )
    return encode_response(correlation_id, response)
