"""Produce's hot-path codec against kio, the reference it must match byte for byte.

The reference decoder is the generic path every other API takes: kio's header and body
readers with ``check_lengths`` before and ``null_field`` after. The reference encoder
is kio's writer of the entity ``build_entity`` makes from the values the handler used
to build. Requests and answers are generated, and requests are also cut short, have
bytes replaced, and go through the fuzzer's schema-breaking frames: the hand-written
check must accept and refuse exactly what the generic path does, and the decoded
request must be kio's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tickwheel.bench.fuzz import all_schema_breaking_frames
from tickwheel.protocol import (
    DecodedRequest,
    InvalidRequestError,
    TopicAnswer,
    VersionRange,
    build_entity,
    decode_request,
    encode_produce_response,
    encode_request,
    invalid_request_response,
    peek_request_key,
    request_schema,
    response_schema,
)
from tickwheel.protocol import encode_response as kio_encode_response
from tickwheel.protocol._schemas import reader_for
from tickwheel.protocol._validate import check_lengths, null_field

PRODUCE = 0
VERSIONS = {PRODUCE: VersionRange(3, 9)}
# Timestamps a broker writes: up to the year 2109 (kio goes through a datetime).
MAX_TIMESTAMP_MS = 2**42

names = st.text(max_size=12)
nullable_text = st.none() | st.text(max_size=12)
int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)


def kio_decode(frame: bytes) -> DecodedRequest | bytes | None:
    """The generic path's answer: the request, or the INVALID_REQUEST response it
    refuses the frame with (None: refused by closing)."""
    key = peek_request_key(frame)
    body_cls = request_schema(key.api_key, key.api_version)
    try:
        header, header_size = reader_for(body_cls.__header_schema__)(frame, 0)
        check_lengths(body_cls, frame, header_size)
        body, _ = reader_for(body_cls)(frame, header_size)
    except Exception:
        return invalid_request_response(key)
    if null_field(body) is not None:
        return invalid_request_response(key)
    return DecodedRequest(header=header, body=body)  # type: ignore[arg-type]


def fast_decode(frame: bytes) -> DecodedRequest | bytes | None:
    try:
        return decode_request(frame, VERSIONS)
    except InvalidRequestError as exc:
        return exc.response


@st.composite
def produce_frames(draw: st.DrawFn) -> bytes:
    """A ProduceRequest frame (no size prefix) that kio encodes."""
    version = draw(st.integers(3, 9))
    values = {
        "transactional_id": draw(nullable_text),
        "acks": draw(int16s),
        "timeout": draw(st.integers(0, 2**31 - 1)),
        "topic_data": [
            {
                "name": draw(names),
                "partition_data": [
                    {"index": draw(int32s), "records": draw(st.none() | st.binary(max_size=40))}
                    for _ in range(draw(st.integers(0, 3)))
                ],
            }
            for _ in range(draw(st.integers(0, 3)))
        ],
    }
    body = build_entity(request_schema(PRODUCE, version), values)
    client_id = draw(st.text(max_size=8))
    return encode_request(draw(int32s), body, client_id=client_id)[4:]


@settings(max_examples=300, deadline=None)
@given(produce_frames())
def test_a_produce_request_decodes_to_what_kio_decodes(frame: bytes) -> None:
    decoded = fast_decode(frame)
    assert isinstance(decoded, DecodedRequest)
    assert decoded == kio_decode(frame)


@settings(max_examples=300, deadline=None)
@given(produce_frames(), st.data())
def test_a_broken_produce_request_is_refused_exactly_when_kio_refuses_it(
    frame: bytes, data: st.DataObject
) -> None:
    broken = bytearray(frame)
    # Keep the API key and version (bytes 0-3): the frame stays a Produce v3-v9.
    for _ in range(data.draw(st.integers(1, 4))):
        if len(broken) <= 4:
            break
        position = data.draw(st.integers(4, len(broken) - 1))
        action = data.draw(st.sampled_from(["replace", "cut", "insert", "truncate"]))
        if action == "replace":
            broken[position] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del broken[position : position + data.draw(st.integers(1, 6))]
        elif action == "insert":
            broken[position:position] = data.draw(st.binary(min_size=1, max_size=6))
        else:
            del broken[position:]
    if len(broken) < 8:
        return
    assert fast_decode(bytes(broken)) == kio_decode(bytes(broken))


def test_the_fuzzers_schema_breaking_produce_frames_are_refused_as_kio_refuses_them() -> None:
    frames = [f[4:] for f in all_schema_breaking_frames() if peek_request_key(f[4:]).api_key == 0]
    assert frames
    refused = 0
    for frame in frames:
        expected = kio_decode(frame)
        assert fast_decode(frame) == expected
        refused += not isinstance(expected, DecodedRequest)
    assert refused > 0


def test_a_null_topic_list_is_refused_by_name() -> None:
    # topic_data as a legacy null array (-1) in Produce v3. ProduceResponse has no
    # top-level error code: the connection closes, as for every refused Produce.
    body = build_entity(request_schema(PRODUCE, 3), {"acks": 1, "timeout": 1000, "topic_data": []})
    frame = encode_request(9, body, client_id="c")[4:]
    with pytest.raises(InvalidRequestError, match="non-nullable field topic_data is null") as exc:
        decode_request(frame[:-4] + b"\xff\xff\xff\xff", VERSIONS)
    assert exc.value.response is None


@st.composite
def answers(draw: st.DrawFn) -> list[TopicAnswer]:
    return [
        (
            draw(names),
            [
                (
                    draw(int32s),
                    draw(st.sampled_from(ErrorCode)).value,
                    draw(int64s),
                    draw(st.just(-1) | st.integers(0, MAX_TIMESTAMP_MS)),
                    draw(int64s),
                    draw(nullable_text),
                )
                for _ in range(draw(st.integers(0, 3)))
            ],
        )
        for _ in range(draw(st.integers(0, 3)))
    ]


def kio_values(topics: list[TopicAnswer]) -> dict[str, Any]:
    """The values the handler used to give ``build_entity``."""
    return {
        "responses": [
            {
                "name": name,
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": error_code,
                        "base_offset": base_offset,
                        "log_append_time": None if append_time_ms < 0 else append_time_ms,
                        "log_start_offset": start_offset,
                        "record_errors": [],
                        "error_message": message,
                    }
                    for index, error_code, base_offset, append_time_ms, start_offset, message in (
                        partitions
                    )
                ],
            }
            for name, partitions in topics
        ],
        "throttle_time": 0,
    }


@settings(max_examples=300, deadline=None)
@given(st.integers(3, 9), int32s, answers())
def test_a_produce_response_is_the_bytes_kio_writes(
    version: int, correlation_id: int, topics: list[TopicAnswer]
) -> None:
    entity = build_entity(response_schema(PRODUCE, version), kio_values(topics))
    expected = kio_encode_response(correlation_id, entity)
    assert encode_produce_response(correlation_id, version, topics) == expected
