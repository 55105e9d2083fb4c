"""Decoding request frames and encoding response frames."""

from __future__ import annotations

import contextlib
import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from tickwheel.protocol import (
    DecodedRequest,
    InvalidRequestError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
    VersionRange,
    build_entity,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    response_schema,
)

SUPPORTED = {3: VersionRange(1, 12), 18: VersionRange(0, 3)}


def metadata_frame(correlation_id: int = 7, version: int = 12) -> bytes:
    header = RequestHeader(
        request_api_key=i16(3),
        request_api_version=i16(version),
        correlation_id=i32(correlation_id),
        client_id="test",
    )
    body = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="t"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, header)
    entity_writer(MetadataRequest)(buffer, body)
    return buffer.getvalue()


def test_a_request_decodes_to_kio_header_and_body() -> None:
    request = decode_request(metadata_frame(), SUPPORTED)
    assert isinstance(request, DecodedRequest)
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 12, 7)
    assert request.header.client_id == "test"
    assert isinstance(request.body, MetadataRequest)
    assert request.body.topics is not None
    assert request.body.topics[0].name == "t"


def test_an_unknown_api_key_is_refused() -> None:
    with pytest.raises(UnknownApiKeyError):
        decode_request(metadata_frame(), {18: VersionRange(0, 3)})


def test_an_unadvertised_version_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError, match="v12"):
        decode_request(metadata_frame(), {3: VersionRange(1, 11)})


def test_trailing_bytes_are_ignored_as_kafka_does() -> None:
    request = decode_request(metadata_frame() + b"\x01\x00\x00", SUPPORTED)
    assert request.correlation_id == 7


def test_a_truncated_body_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError):
        decode_request(metadata_frame()[:-3], SUPPORTED)


@settings(max_examples=2000)
@given(st.binary(min_size=8, max_size=200), st.sampled_from([3, 18]), st.integers(0, 12))
def test_random_bytes_either_decode_or_raise_a_protocol_error(
    tail: bytes, api_key: int, version: int
) -> None:
    frame = struct.pack(">hh", api_key, version) + tail
    with contextlib.suppress(ProtocolError):
        decode_request(frame, SUPPORTED)


def test_flexible_responses_carry_header_v1_and_others_v0() -> None:
    metadata = build_entity(
        response_schema(3, 12), {"throttle_time": 0, "brokers": [], "topics": []}
    )
    frame = encode_response(99, metadata)
    size, correlation_id, tagged_fields = struct.unpack_from(">iib", frame)
    assert (size, correlation_id, tagged_fields) == (len(frame) - 4, 99, 0)
    api_versions = build_entity(
        response_schema(18, 3), {"error_code": 0, "api_keys": [], "throttle_time": 0}
    )
    frame = encode_response(98, api_versions)
    # ApiVersions always uses response header v0: the error code follows the id.
    assert struct.unpack_from(">iih", frame) == (len(frame) - 4, 98, 0)


def test_the_api_versions_fallback_is_a_v0_body_with_error_35() -> None:
    frame = encode_api_versions_fallback(5, [(3, VersionRange(1, 12)), (18, VersionRange(0, 3))])
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 5)
    body, _ = entity_reader(ApiVersionsV0)(frame, 8)
    assert body.error_code is ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (3, 1, 12),
        (18, 0, 3),
    ]
