"""The sans-IO client connection: requests framed with correlation ids, response bytes
split anywhere reassembled and matched, versions negotiated from ApiVersions."""

from __future__ import annotations

import contextlib
import itertools
import re
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema
from kio.schema.errors import ErrorCode

from tickwheel.protocol import (
    ApiKey,
    ClientConnection,
    CorrelationError,
    MalformedFrameError,
    RequestKey,
    Response,
    VersionRange,
    build_entity,
    decode_request,
    encode_response,
    highest_common_version,
    peek_request_key,
    response_schema,
)

SERVED = {
    ApiKey.PRODUCE: VersionRange(3, 9),
    ApiKey.FETCH: VersionRange(4, 12),
    ApiKey.METADATA: VersionRange(1, 12),
}
KIO_MAX_API_KEY = 128
KIO_MAX_VERSION = 20
METADATA_REQUEST = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}


def api_versions_answer(correlation_id: int, served: dict[ApiKey, VersionRange]) -> bytes:
    """An ApiVersions v0 response frame listing ``served``."""
    body = build_entity(
        response_schema(ApiKey.API_VERSIONS, 0),
        {
            "error_code": 0,
            "api_keys": [
                {"api_key": key, "min_version": r.min_version, "max_version": r.max_version}
                for key, r in served.items()
            ],
        },
    )
    return encode_response(correlation_id, body)


def metadata_answer(correlation_id: int, cluster_id: str) -> bytes:
    """A Metadata v12 response frame (flexible: response header v1) naming ``cluster_id``."""
    body = build_entity(
        response_schema(ApiKey.METADATA, 12),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
            "cluster_id": cluster_id,
            "controller_id": 1,
            "topics": [],
        },
    )
    return encode_response(correlation_id, body)


def sent_key(frame: bytes) -> RequestKey:
    return peek_request_key(frame[4:])


def feed(connection: ClientConnection, data: bytes) -> list[Response]:
    connection.receive_data(data)
    responses = []
    while (response := connection.next_response()) is not None:
        responses.append(response)
    return responses


def test_requests_get_increasing_correlation_ids_and_the_client_id() -> None:
    connection = ClientConnection("tester")
    first = connection.send_api_versions()
    second = connection.send(ApiKey.METADATA, 12, METADATA_REQUEST)
    assert sent_key(first) == RequestKey(ApiKey.API_VERSIONS, 0, 0)
    assert sent_key(second) == RequestKey(ApiKey.METADATA, 12, 1)
    assert connection.in_flight == 2
    decoded = decode_request(second[4:], {ApiKey.METADATA: VersionRange(12, 12)})
    assert decoded.header.client_id == "tester"


def test_versions_come_from_the_api_versions_answer() -> None:
    connection = ClientConnection("tester")
    assert connection.version(ApiKey.FETCH, VersionRange(0, 17)) is None  # not asked yet
    connection.send_api_versions()
    (answer,) = feed(connection, api_versions_answer(0, SERVED))
    assert answer.api_key == ApiKey.API_VERSIONS
    assert connection.served(ApiKey.FETCH) == VersionRange(4, 12)
    assert connection.version(ApiKey.FETCH, VersionRange(0, 17)) == 12
    assert connection.version(ApiKey.FETCH, VersionRange(4, 7)) == 7
    assert connection.version(ApiKey.PRODUCE, VersionRange(10, 11)) is None
    assert connection.version(ApiKey.LIST_OFFSETS, VersionRange(0, 9)) is None
    assert connection.served(ApiKey.LIST_OFFSETS) is None


@pytest.mark.parametrize(
    ("served", "wanted", "expected"),
    [
        (VersionRange(0, 3), VersionRange(0, 3), 3),
        (VersionRange(0, 3), VersionRange(2, 9), 3),
        (VersionRange(5, 9), VersionRange(0, 5), 5),
        (VersionRange(5, 9), VersionRange(0, 4), None),
        (VersionRange(0, 1), VersionRange(90, 91), None),
    ],
)
def test_highest_common_version(
    served: VersionRange, wanted: VersionRange, expected: int | None
) -> None:
    assert highest_common_version(served, wanted) == expected


def test_exact_reads_of_bytes_needed_make_a_response() -> None:
    connection = ClientConnection("tester")
    connection.send(ApiKey.METADATA, 12, METADATA_REQUEST)
    frame = metadata_answer(0, "c")
    connection.receive_data(frame[:4])
    assert connection.next_response() is None
    assert connection.bytes_needed() == len(frame) - 4
    connection.receive_data(frame[4:])
    response = connection.next_response()
    assert response is not None
    assert response.body.cluster_id == "c"


@settings(max_examples=200, deadline=None)
@given(
    clusters=st.lists(st.text(max_size=40), min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_responses_split_anywhere_reassemble(clusters: list[str], cuts: list[int]) -> None:
    connection = ClientConnection("tester")
    frames = []
    for cluster_id in clusters:
        frame = connection.send(ApiKey.METADATA, 12, METADATA_REQUEST)
        frames.append(metadata_answer(sent_key(frame).correlation_id, cluster_id))
    stream = b"".join(frames)
    bounds = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    responses: list[Response] = []
    for start, end in itertools.pairwise(bounds):
        responses += feed(connection, stream[start:end])
    assert [r.body.cluster_id for r in responses] == clusters
    assert [r.correlation_id for r in responses] == list(range(len(clusters)))
    assert {(r.api_key, r.api_version) for r in responses} == {(ApiKey.METADATA, 12)}
    assert connection.in_flight == 0
    assert connection.bytes_needed() == 4


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_bytes_needed_never_reads_into_the_next_response(data: st.DataObject) -> None:
    connection = ClientConnection("tester")
    stream = b""
    for index in range(3):
        connection.send(ApiKey.METADATA, 12, METADATA_REQUEST)
        stream += metadata_answer(index, "x" * index)
    responses: list[Response] = []
    position = 0
    while position < len(stream):
        needed = connection.bytes_needed()
        size = data.draw(st.integers(min_value=1, max_value=needed))
        responses += feed(connection, stream[position : position + size])
        position += size
    assert [r.correlation_id for r in responses] == [0, 1, 2]


def test_an_answer_to_another_request_is_named() -> None:
    connection = ClientConnection("tester")
    connection.send_api_versions()
    with pytest.raises(CorrelationError, match="response to request 5, expected 0"):
        feed(connection, api_versions_answer(5, SERVED))


def test_an_answer_to_no_request_is_named() -> None:
    connection = ClientConnection("tester")
    with pytest.raises(CorrelationError, match="response to request 0, but none was sent"):
        feed(connection, api_versions_answer(0, SERVED))


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_a_frame_shorter_than_a_correlation_id_is_malformed(size: int) -> None:
    connection = ClientConnection("tester")
    connection.send_api_versions()
    with pytest.raises(MalformedFrameError, match=f"frame of {size} bytes is shorter"):
        feed(connection, struct.pack(">i", size) + b"\x00" * max(size, 0))


def test_a_frame_that_ends_before_its_body_is_malformed() -> None:
    connection = ClientConnection("tester")
    connection.send_api_versions()
    whole = api_versions_answer(0, SERVED)
    body = whole[4:-3]  # the frame claims fewer bytes than the answer has
    with pytest.raises(MalformedFrameError, match="ends before the response does"):
        feed(connection, struct.pack(">i", len(body)) + body)


def test_a_response_class_can_replace_kios() -> None:
    asked: list[tuple[int, int]] = []

    def response_class(api_key: int, api_version: int) -> Any:
        asked.append((api_key, api_version))
        return response_schema(api_key, api_version)

    connection = ClientConnection("tester", response_class=response_class)
    connection.send_api_versions()
    (answer,) = feed(connection, api_versions_answer(0, SERVED))
    assert answer.body.error_code == ErrorCode.none
    assert asked == [(ApiKey.API_VERSIONS, 0)]


def _kafka_name(request_class: type) -> str:
    """``OffsetForLeaderEpochRequest`` -> ``OFFSET_FOR_LEADER_EPOCH``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", request_class.__name__.removesuffix("Request")).upper()


def _kio_request_class(api_key: int) -> type | None:
    for version in range(KIO_MAX_VERSION):
        with contextlib.suppress(KioIndexError):
            return load_request_schema(api_key, version)
    return None


def test_api_keys_are_kios_every_one_by_kafkas_name() -> None:
    kio_keys = {
        key: cls for key in range(KIO_MAX_API_KEY) if (cls := _kio_request_class(key)) is not None
    }
    assert {key: _kafka_name(cls) for key, cls in kio_keys.items()} == {
        int(key): key.name for key in ApiKey
    }
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75
    assert {1: "fetch"}[ApiKey.FETCH] == "fetch"
    with pytest.raises(ValueError, match="4 is not a valid ApiKey"):
        ApiKey(4)
