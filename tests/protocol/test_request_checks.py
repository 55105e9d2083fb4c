"""The hot path's hand-written request checks against the generic path.

The reference is the path every other API takes: kio's header and body readers with
``check_lengths`` before and ``null_field`` after. Produce and Fetch requests are
generated and kio-encoded, then also cut short, have bytes replaced or inserted, and
go through the fuzzer's schema-breaking frames: the hand-written checks must accept
and refuse exactly what the generic path does, and the decoded request must be kio's.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.bench.fuzz import all_schema_breaking_frames
from tickwheel.protocol import (
    ApiKey,
    DecodedRequest,
    InvalidRequestError,
    VersionRange,
    build_entity,
    decode_request,
    encode_request,
    invalid_request_response,
    peek_request_key,
    request_schema,
)
from tickwheel.protocol._schemas import reader_for
from tickwheel.protocol._validate import check_lengths, null_field

PRODUCE = ApiKey.PRODUCE
FETCH = ApiKey.FETCH
VERSIONS = {PRODUCE: VersionRange(3, 12), FETCH: VersionRange(4, 12)}

names = st.text(max_size=12)
nullable_text = st.none() | st.text(max_size=12)
int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
int8s = st.integers(-(2**7), 2**7 - 1)


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
    version = draw(st.integers(3, 12))
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


@st.composite
def fetch_frames(draw: st.DrawFn) -> bytes:
    """A FetchRequest frame (no size prefix) that kio encodes."""
    version = draw(st.integers(4, 12))
    partition = st.fixed_dictionaries(
        {
            "partition": int32s,
            "current_leader_epoch": int32s,
            "fetch_offset": int64s,
            "last_fetched_epoch": int32s,
            "log_start_offset": int64s,
            "partition_max_bytes": int32s,
        }
    )
    values = {
        "replica_id": draw(int32s),
        "max_wait": draw(st.integers(0, 2**31 - 1)),
        "min_bytes": draw(int32s),
        "max_bytes": draw(int32s),
        "isolation_level": draw(int8s),
        "session_id": draw(int32s),
        "session_epoch": draw(int32s),
        "topics": draw(
            st.lists(
                st.fixed_dictionaries(
                    {"topic": names, "partitions": st.lists(partition, max_size=3)}
                ),
                max_size=3,
            )
        ),
        "forgotten_topics_data": draw(
            st.lists(
                st.fixed_dictionaries({"topic": names, "partitions": st.lists(int32s, max_size=3)}),
                max_size=2,
            )
        ),
        "rack_id": draw(names),
    }
    body = build_entity(request_schema(FETCH, version), values)
    return encode_request(draw(int32s), body, client_id=draw(st.text(max_size=8)))[4:]


requests = produce_frames() | fetch_frames()


@settings(max_examples=300, deadline=None)
@given(requests)
def test_a_request_decodes_to_what_kio_decodes(frame: bytes) -> None:
    decoded = fast_decode(frame)
    assert isinstance(decoded, DecodedRequest)
    assert decoded == kio_decode(frame)


@settings(max_examples=300, deadline=None)
@given(requests, st.data())
def test_a_broken_request_is_refused_exactly_when_kio_refuses_it(
    frame: bytes, data: st.DataObject
) -> None:
    broken = bytearray(frame)
    # Keep the API key and version (bytes 0-3): the frame stays a Produce or a Fetch.
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


def test_the_fuzzers_schema_breaking_frames_are_refused_as_kio_refuses_them() -> None:
    frames = [
        f[4:] for f in all_schema_breaking_frames() if peek_request_key(f[4:]).api_key in VERSIONS
    ]
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


def test_a_null_partition_list_of_a_fetch_is_refused_by_name() -> None:
    body = build_entity(
        request_schema(FETCH, 12),
        {
            "max_wait": 500,
            "min_bytes": 1,
            "topics": [{"topic": "t", "partitions": []}],
            "forgotten_topics_data": [],
        },
    )
    frame = encode_request(9, body, client_id="c")[4:]
    # The topic's partitions (compact 1: empty) become compact 0: null.
    at = frame.index(b"\x02t\x01") + 2
    broken = frame[:at] + b"\x00" + frame[at + 1 :]
    with pytest.raises(InvalidRequestError, match="non-nullable field partitions is null"):
        decode_request(broken, VERSIONS)
