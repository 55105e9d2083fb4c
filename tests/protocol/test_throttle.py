"""``with_throttle_time`` rewrites the field where each response version holds it."""

from __future__ import annotations

from typing import Any

import pytest
from kio.serial import entity_reader

from tickwheel.protocol import (
    FetchResponseFrame,
    LeaderHints,
    NodeEndpoint,
    default_entity,
    encode_fetch_response,
    encode_produce_response,
    encode_response,
    response_schema,
    with_throttle_time,
)

THROTTLE_MS = 1234
CORRELATION_ID = 7


def _decoded(frame: bytes, api_key: int, version: int) -> Any:
    cls = response_schema(api_key, version)
    header_cls: Any = cls.__header_schema__
    header, header_size = entity_reader(header_cls)(frame, 4)
    assert int(header.correlation_id) == CORRELATION_ID
    body, body_size = entity_reader(cls)(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame)
    return body


def _throttle_ms(body: Any) -> float:
    return float(body.throttle_time.total_seconds() * 1000)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(3, 4), (3, 12), (19, 2), (19, 5), (48, 0), (48, 1), (32, 4), (60, 1), (11, 7)],
)
def test_the_first_field_is_raised(api_key: int, version: int) -> None:
    frame = encode_response(CORRELATION_ID, default_entity(response_schema(api_key, version)))
    raised = with_throttle_time(frame, api_key, version, THROTTLE_MS)
    assert isinstance(raised, bytes)
    assert _throttle_ms(_decoded(raised, api_key, version)) == THROTTLE_MS
    # A longer throttle already there stays.
    assert with_throttle_time(raised, api_key, version, 5) == raised


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_s_last_field_is_raised(version: int) -> None:
    frame = encode_produce_response(CORRELATION_ID, version, [("t", [(0, 0, 5, -1, 0, None, ())])])
    raised = with_throttle_time(frame, 0, version, THROTTLE_MS)
    assert isinstance(raised, bytes)
    body = _decoded(raised, 0, version)
    assert _throttle_ms(body) == THROTTLE_MS
    assert body.responses[0].partition_responses[0].base_offset == 5


@pytest.mark.parametrize("version", range(10, 13))
def test_produce_s_throttle_before_leader_hints_is_raised(version: int) -> None:
    hints = LeaderHints({("t", 0): (2, 7)}, (NodeEndpoint(2, "broker-2", 9092, "rack-a"),))
    frame = encode_produce_response(
        CORRELATION_ID, version, [("t", [(0, 6, -1, -1, -1, None, ())])], hints=hints
    )
    raised = with_throttle_time(frame, 0, version, THROTTLE_MS)
    assert isinstance(raised, bytes)
    body = _decoded(raised, 0, version)
    assert _throttle_ms(body) == THROTTLE_MS
    leader = body.responses[0].partition_responses[0].current_leader
    assert (leader.leader_id, leader.leader_epoch) == (2, 7)
    assert [(n.node_id, n.host, n.port, n.rack) for n in body.node_endpoints] == [
        (2, "broker-2", 9092, "rack-a")
    ]
    assert with_throttle_time(raised, 0, version, 5) == raised


@pytest.mark.parametrize("version", [4, 7, 12])
def test_a_fetch_frame_is_raised(version: int) -> None:
    frame = encode_fetch_response(CORRELATION_ID, version, [])
    raised = with_throttle_time(frame, 1, version, THROTTLE_MS)
    assert isinstance(raised, FetchResponseFrame)
    joined = b"".join(chunk for chunk in raised.chunks if isinstance(chunk, bytes))
    assert len(joined) == raised.total_bytes
    assert _throttle_ms(_decoded(joined, 1, version)) == THROTTLE_MS


def test_an_answer_without_the_field_is_left_alone() -> None:
    frame = encode_response(CORRELATION_ID, default_entity(response_schema(17, 1)))
    assert with_throttle_time(frame, 17, 1, THROTTLE_MS) == frame
