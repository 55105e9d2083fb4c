"""Requests that break their schema: refused at decode, answered INVALID_REQUEST or not.

The oracle for "no None where the schema has none" is a deliberately plain walk over
every field of the decoded request; the decoder's own check looks only where kio can
put a None, and these tests hold it to the plain walk on every schema-breaking frame
of every API and version the broker serves.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tickwheel.bench.fuzz import (
    all_schema_breaking_frames,
    encode_body,
    encode_request,
    seed_entity,
    served_versions,
)
from tickwheel.protocol import (
    ApiKey,
    InvalidRequestError,
    RequestKey,
    build_entity,
    decode_request,
    invalid_request_response,
    request_schema,
    response_schema,
)
from tickwheel.protocol import encode_request as encode_request_frame
from tickwheel.protocol._validate import LengthError, check_lengths
from tickwheel.server.apis import SUPPORTED_VERSIONS

FETCH = ApiKey.FETCH
PRODUCE = ApiKey.PRODUCE
LIST_OFFSETS = ApiKey.LIST_OFFSETS
METADATA = ApiKey.METADATA
ALTER_PARTITION_REASSIGNMENTS = ApiKey.ALTER_PARTITION_REASSIGNMENTS
COMPACT_NULL = b"\x00"
# Compact length 2^32 - 1: 2^32 - 2 items.
COMPACT_HUGE = b"\xff\xff\xff\xff\x0f"


def with_field(key: int, version: int, path: tuple[str | int, ...], bad: bytes) -> bytes:
    """The seed request of ``key`` v``version`` (no size prefix), the field at ``path``
    written as ``bad``; correlation id 77."""
    seed = seed_entity(key, version)
    frame = encode_request(key, version, seed, 77)[4:]
    header = frame[: len(frame) - len(encode_body(seed))]
    return header + encode_body(seed, path, bad)


def nulls_anywhere(value: Any, path: str = "") -> list[str]:
    """Every non-nullable field of ``value`` (at any depth) that holds None."""
    found = []
    for field in dataclasses.fields(value):
        nullable = isinstance(field.type, types.UnionType) and type(None) in typing.get_args(
            field.type
        )
        item = getattr(value, field.name)
        here = f"{path}{field.name}"
        if item is None:
            if not nullable:
                found.append(here)
        elif isinstance(item, tuple):
            for index, element in enumerate(item):
                if dataclasses.is_dataclass(element):
                    found += nulls_anywhere(element, f"{here}[{index}].")
        elif dataclasses.is_dataclass(item):
            found += nulls_anywhere(item, f"{here}.")
    return found


def test_every_seed_decodes_and_is_encoded_as_kio_encodes_it() -> None:
    """The fuzzer's own encoder (which can break one field) agrees with kio's."""
    for key, version in served_versions():
        seed = seed_entity(key, version)
        frame = encode_request(key, version, seed, 5)
        request = decode_request(frame[4:], SUPPORTED_VERSIONS)
        assert request.body == seed
        assert frame.endswith(encode_body(seed)), f"api {key} v{version}"


def test_no_schema_breaking_request_reaches_a_handler_with_a_forbidden_null() -> None:
    refused = decoded = 0
    for frame in all_schema_breaking_frames():
        try:
            request = decode_request(frame[4:], SUPPORTED_VERSIONS)
        except InvalidRequestError:
            refused += 1
            continue
        decoded += 1
        assert nulls_anywhere(request.body) == [], request
    # Both kinds happen: null arrays and bad lengths are refused, out-of-range numbers
    # and nulls where the schema allows them decode (the handlers must cope).
    assert refused > 0
    assert decoded > 0


def test_a_null_array_is_refused_and_named() -> None:
    with pytest.raises(InvalidRequestError, match=r"non-nullable field topics is null"):
        decode_request(with_field(FETCH, 12, ("topics",), COMPACT_NULL), SUPPORTED_VERSIONS)
    # Produce and Fetch are checked by hand (``_request_checks``), which names the field
    # alone; the generic check names the path.
    nested = with_field(LIST_OFFSETS, 7, ("topics", 0, "partitions"), COMPACT_NULL)
    with pytest.raises(InvalidRequestError, match=r"topics\[0\]\.partitions is null"):
        decode_request(nested, SUPPORTED_VERSIONS)


def test_a_nullable_array_may_be_null() -> None:
    request = decode_request(
        with_field(METADATA, 12, ("topics",), COMPACT_NULL), SUPPORTED_VERSIONS
    )
    assert request.body.topics is None  # type: ignore[attr-defined]


def test_a_count_past_the_end_is_refused_before_kio_reserves_memory_for_it() -> None:
    # 2^32 - 2 topics in a frame of a few dozen bytes: kio would ask for 32 GiB and
    # abort the process.
    huge = with_field(FETCH, 12, ("topics",), COMPACT_HUGE)
    with pytest.raises(InvalidRequestError, match="topics announces 4294967294 items"):
        decode_request(huge, SUPPORTED_VERSIONS)


@pytest.mark.parametrize("count", [-2, -(2**31), 2**31 - 1])
def test_a_legacy_count_below_null_or_past_the_end_is_refused(count: int) -> None:
    broken = with_field(PRODUCE, 3, ("topic_data", 0, "partition_data"), struct.pack(">i", count))
    with pytest.raises(InvalidRequestError, match="partition_data"):
        decode_request(broken, SUPPORTED_VERSIONS)


def test_check_lengths_takes_a_count_that_exactly_fits() -> None:
    seed = seed_entity(FETCH, 4)
    body = encode_body(seed)
    check_lengths(type(seed), body, 0)
    with pytest.raises(LengthError, match="needs"):
        check_lengths(type(seed), body[:-1], 0)


@pytest.mark.parametrize("version", [0, 1])
def test_a_nullable_array_of_numbers_is_counted_as_an_array(version: int) -> None:
    """AlterPartitionReassignments' replicas: a nullable ``[]int32``, lists of two
    lengths and a null one."""
    partitions = [
        {"partition_index": 0, "replicas": [4]},
        {"partition_index": 1, "replicas": [1, 2, 3]},
        {"partition_index": 2, "replicas": None},
    ]
    body = build_entity(
        request_schema(ALTER_PARTITION_REASSIGNMENTS, version),
        {
            "topics": [
                {"name": "moved", "partitions": partitions},
                {"name": "elsewhere", "partitions": [{"partition_index": 0, "replicas": [5]}]},
            ]
        },
    )
    frame = encode_request_frame(5, body, client_id="validate")
    request = decode_request(frame[4:], SUPPORTED_VERSIONS)
    assert request.body == body


def test_the_answer_carries_invalid_request_where_the_response_has_an_error_code() -> None:
    with pytest.raises(InvalidRequestError) as raised:
        decode_request(with_field(FETCH, 12, ("topics",), COMPACT_NULL), SUPPORTED_VERSIONS)
    answer = raised.value.response
    assert answer is not None
    size, correlation_id = struct.unpack_from(">ii", answer)
    assert (size, correlation_id) == (len(answer) - 4, 77)
    # Fetch v12's response header is v1: the correlation id, then no tagged fields.
    body, _ = entity_reader(response_schema(FETCH, 12))(answer, 9)
    assert body.error_code == ErrorCode.invalid_request
    assert body.responses == ()


def test_every_api_with_a_top_level_error_code_can_answer_invalid_request() -> None:
    answered = set()
    for key, version in served_versions():
        answer = invalid_request_response(RequestKey(key, version, 1))
        has_error_code = "error_code" in {
            f.name for f in dataclasses.fields(response_schema(key, version))
        }
        assert (answer is not None) == has_error_code
        if answer is None:
            continue
        answered.add(key)
        cls = response_schema(key, version)
        # Size and correlation id; a v1 response header adds its empty tagged fields.
        header_bytes = 8 + (1 if cls.__header_schema__.__version__ >= 1 else 0)
        body, body_bytes = entity_reader(cls)(answer, header_bytes)
        assert header_bytes + body_bytes == len(answer)
        assert body.error_code == ErrorCode.invalid_request
    assert FETCH in answered
    assert PRODUCE not in answered, "Produce's errors are per partition: its connection closes"
