"""Decode request frames and encode response frames with kio.

Sans-IO, in the manner of h11: ``decode_request`` takes the bytes of one frame (after
its size prefix) and returns the kio header and body; ``encode_response`` returns the
bytes of one response frame, size prefix included. Which API keys and versions are
acceptable is the caller's table (the broker advertises what it handles), so this
module knows nothing of handlers.

A request is checked against the schema rules kio leaves to its caller
(``_validate``): its counts and lengths before kio reads it, its nulls after, so a
handler never meets a None its schema forbids and no count reserves memory the frame
cannot fill. Produce and Fetch, sent once per message and once per replication round
trip, are checked by hand instead (``_request_checks``: the same rules in one walk).
A request that fails to decode or fails those checks raises ``InvalidRequestError``
carrying Kafka's answer, INVALID_REQUEST (42), built for any API whose response has a
top-level error code (every other field null, empty or zero); the others have no way
to say it, and their connection is closed.

Response headers are written by hand: v0 is the correlation id, v1 adds an empty
tagged-field section; kio's encoder is used for bodies. kio never writes a tagged
field that holds its default value, which old librdkafka (before 2.2) cannot skip.

Stateless apart from the schema caches; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta
from kio.static.protocol import Entity, RequestHeader, RequestPayload, ResponsePayload

from tickwheel.protocol._api_keys import ApiKey
from tickwheel.protocol._build import build_entity
from tickwheel.protocol._errors import (
    InvalidRequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from tickwheel.protocol._framing import RequestKey, peek_request_key, size_prefix
from tickwheel.protocol._request_checks import check_fetch_body, check_produce_body
from tickwheel.protocol._schemas import reader_for, request_schema, response_schema, writer_for
from tickwheel.protocol._validate import LengthError, check_lengths, null_field, without_none
from tickwheel.protocol._versions import convert

B = TypeVar("B", bound=RequestPayload)
API_VERSIONS_KEY: Final[int] = int(ApiKey.API_VERSIONS)
_PRODUCE_KEY: Final[int] = int(ApiKey.PRODUCE)
_FETCH_KEY: Final[int] = int(ApiKey.FETCH)
# The requests a producer or a follower sends once per message or per round trip:
# their bodies are checked by hand (``_request_checks``), not by the schema walk.
_HOT_PATH_CHECKS: dict[int, Callable[[bytes, int, int], None]] = {
    _PRODUCE_KEY: check_produce_body,
    _FETCH_KEY: check_fetch_body,
}
# The response header of a flexible version carries a tagged-field section: empty.
_EMPTY_TAGGED_FIELDS = b"\x00"
_RESPONSE_HEADER_V0 = struct.Struct(">i")
NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))
"""A response's ``throttle_time`` when the client is not throttled."""
# Zero values of the field types that are not numbers (numbers, durations and
# timestamps are 0, which ``build_entity`` coerces).
_EMPTY_BY_KAFKA_TYPE: dict[object, object] = {"string": "", "bytes": b"", "bool": False}


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

    def body_as(self, cls: type[B]) -> B:
        """The body as ``cls``, a request class of this API (the newest version its
        handler knows): itself when the client sent that version, else converted, the
        fields the sent version lacks at Kafka's defaults."""
        if cls.__api_key__ != self.api_key:
            raise TypeError(f"{cls.__name__} is not a request of API key {self.api_key}")
        return convert(cls, self.body)


def decode_request(frame: bytes, supported: Mapping[int, VersionRange]) -> DecodedRequest:
    """Decode one request frame whose API key and version are in ``supported``.

    Raises ``InvalidRequestError`` (with the INVALID_REQUEST answer, when the API has
    one) for a request that does not decode, announces a count or length past its end,
    or holds a null its schema forbids.
    """
    key = peek_request_key(frame)
    versions = supported.get(key.api_key)
    if versions is None:
        raise UnknownApiKeyError(f"api_key={key.api_key} is not supported")
    if key.api_version not in versions:
        raise UnsupportedVersionError(
            f"api_key={key.api_key} v{key.api_version} is not served "
            f"(supported {versions.min_version}-{versions.max_version})"
        )
    body_cls = request_schema(key.api_key, key.api_version)
    header_cls: type[Entity] = body_cls.__header_schema__
    # Any failure to decode untrusted bytes, whatever kio raises, means the same thing.
    try:
        header, header_size = reader_for(header_cls)(frame, 0)
        # Before kio reads the body: it reserves memory for each count it reads.
        hot_check = _HOT_PATH_CHECKS.get(key.api_key)
        if hot_check is None:
            check_lengths(body_cls, frame, header_size)
        else:
            # Written by hand; it also refuses the nulls null_field finds.
            hot_check(frame, header_size, key.api_version)
        body, _ = reader_for(body_cls)(frame, header_size)
    except LengthError as exc:
        raise _invalid_request(key, str(exc)) from exc
    except Exception as exc:
        raise _invalid_request(key, f"does not decode: {exc!r}") from exc
    null = null_field(body) if hot_check is None else None
    if null is not None:
        raise _invalid_request(key, f"non-nullable field {null} is null")
    # Bytes after the body are ignored, as Kafka's generated readers do: librdkafka 2.16
    # ends its Metadata v12 request with three bytes the schema does not have.
    # The readers were chosen by ``body_cls`` and its own header schema, so they made these.
    return DecodedRequest(header=cast(RequestHeader, header), body=cast(RequestPayload, body))


def _invalid_request(key: RequestKey, reason: str) -> InvalidRequestError:
    name = request_schema(key.api_key, key.api_version).__name__
    return InvalidRequestError(
        f"{name} v{key.api_version} (api_key={key.api_key}, correlation_id="
        f"{key.correlation_id}) {reason}",
        invalid_request_response(key),
    )


def invalid_request_response(key: RequestKey) -> bytes | None:
    """The INVALID_REQUEST answer to the request ``key`` names, if its response can carry
    one (a top-level ``error_code``, every other field empty); else None."""
    return error_response(key, ErrorCode.invalid_request)


def error_response(key: RequestKey, error_code: ErrorCode) -> bytes | None:
    """The answer refusing the whole request ``key`` names with ``error_code``, if its
    response can carry one (a top-level ``error_code``, every other field empty); else
    None (Kafka's ``AbstractRequest.getErrorResponse`` for such responses)."""
    cls = response_schema(key.api_key, key.api_version)
    if "error_code" not in {field.name for field in dataclasses.fields(cls)}:
        return None
    values = {**_empty_values(cls), "error_code": error_code}
    return encode_response(key.correlation_id, build_entity(cls, values))


@functools.cache
def _empty_values(cls: type[Entity]) -> Mapping[str, Any]:
    """A value for every field of ``cls`` without a default: null, empty, or zero."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            continue
        tp, nullable = without_none(field.type)
        if nullable:
            values[field.name] = None
        elif typing.get_origin(tp) is tuple:
            values[field.name] = ()
        elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
            values[field.name] = _empty_values(tp)
        else:
            values[field.name] = _EMPTY_BY_KAFKA_TYPE.get(field.metadata.get("kafka_type"), 0)
    return values


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


def request_header_bytes(
    api_key: int, api_version: int, correlation_id: int, *, client_id: str
) -> bytes:
    """The request header for ``api_key`` at ``api_version`` (v2 for flexible versions)."""
    header_cls: Any = request_schema(api_key, api_version).__header_schema__
    header = header_cls(
        request_api_key=i16(api_key),
        request_api_version=i16(api_version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    writer_for(header_cls)(buffer, header)
    return buffer.getvalue()


def encode_request(correlation_id: int, request: RequestPayload, *, client_id: str) -> bytes:
    """One request frame, size prefix included (the client side: tests, broker to broker)."""
    request_cls = type(request)
    header = request_header_bytes(
        int(request_cls.__api_key__),
        int(request_cls.__version__),
        correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    writer_for(request_cls)(buffer, request)
    body = buffer.getvalue()
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
