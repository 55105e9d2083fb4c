"""The hand-written ProduceResponse encoder writes exactly what kio writes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tickwheel.protocol import (
    ApiKey,
    LeaderHints,
    NodeEndpoint,
    PartitionAnswer,
    TopicAnswer,
    build_entity,
    encode_produce_response,
    encode_response,
    response_schema,
)

PRODUCE = ApiKey.PRODUCE
# Timestamps a broker writes: up to the year 2109 (kio goes through a datetime).
MAX_TIMESTAMP_MS = 2**42

names = st.text(max_size=12)
nullable_text = st.none() | st.text(max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
LEADER_FIELDS = ("leader_id", "leader_epoch")
endpoints = st.lists(
    st.builds(NodeEndpoint, node_id=int32s, host=names, port=int32s, rack=nullable_text),
    max_size=3,
)


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
                    draw(st.lists(st.tuples(int32s, nullable_text), max_size=3)),
                )
                for _ in range(draw(st.integers(0, 3)))
            ],
        )
        for _ in range(draw(st.integers(0, 3)))
    ]


def kio_partition(answer: PartitionAnswer, leader: tuple[int, int] | None = None) -> dict[str, Any]:
    """One partition's values as the handler used to give ``build_entity``."""
    index, error_code, base_offset, append_time_ms, start_offset, message, errors = answer
    hint = {}
    if leader is not None:
        hint = {"current_leader": dict(zip(LEADER_FIELDS, leader, strict=True))}
    return {
        **hint,
        "index": index,
        "error_code": error_code,
        "base_offset": base_offset,
        "log_append_time": None if append_time_ms < 0 else append_time_ms,
        "log_start_offset": start_offset,
        "record_errors": [
            {"batch_index": batch_index, "batch_index_error_message": reason}
            for batch_index, reason in errors
        ],
        "error_message": message,
    }


def kio_values(topics: list[TopicAnswer], hints: LeaderHints | None = None) -> dict[str, Any]:
    """The values the handler used to give ``build_entity``."""
    leaders = {} if hints is None else hints.leaders
    endpoints = () if hints is None else hints.endpoints
    return {
        "responses": [
            {
                "name": name,
                "partition_responses": [
                    kio_partition(p, leaders.get((name, p[0]))) for p in partitions
                ],
            }
            for name, partitions in topics
        ],
        "throttle_time": 0,
        "node_endpoints": [
            {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
            for e in endpoints
        ],
    }


@settings(max_examples=300, deadline=None)
@given(st.integers(3, 12), int32s, answers())
def test_a_produce_response_is_the_bytes_kio_writes(
    version: int, correlation_id: int, topics: list[TopicAnswer]
) -> None:
    entity = build_entity(response_schema(PRODUCE, version), kio_values(topics))
    expected = encode_response(correlation_id, entity)
    assert encode_produce_response(correlation_id, version, topics) == expected


@settings(max_examples=300, deadline=None)
@given(st.integers(3, 12), int32s, answers(), st.data())
def test_leader_hints_are_the_tagged_fields_kio_writes(
    version: int, correlation_id: int, topics: list[TopicAnswer], data: st.DataObject
) -> None:
    pairs = [(name, p[0]) for name, partitions in topics for p in partitions]
    hinted = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    hints = LeaderHints(
        {pair: data.draw(st.tuples(int32s, int32s)) for pair in hinted}, tuple(data.draw(endpoints))
    )
    entity = build_entity(response_schema(PRODUCE, version), kio_values(topics, hints))
    expected = encode_response(correlation_id, entity)
    assert encode_produce_response(correlation_id, version, topics, hints=hints) == expected
