"""The hand-written Fetch encoders (the response, the follower's request) write exactly
what kio's encoder writes."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from tickwheel.protocol import (
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    FOLLOWER_FETCH_VERSION,
    FetchPartitionData,
    FetchTopicData,
    FollowerFetchPartitionData,
    build_entity,
    encode_fetch_response,
    encode_follower_fetch_request,
    encode_request,
    request_schema,
    response_schema,
)

FLEXIBLE_VERSION = 12
# Nine versions: keep the whole property test within a few seconds.
EXAMPLES_PER_VERSION = 40


@dataclass(frozen=True)
class Blob:
    """Record bytes standing in for a log slice."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
partitions = st.builds(
    FetchPartitionData,
    partition_index=int32,
    error_code=st.integers(min_value=0, max_value=100),
    high_watermark=int64,
    last_stable_offset=int64,
    log_start_offset=int64,
    aborted_transactions=st.none() | st.lists(st.tuples(int64, int64), max_size=3),
    records=st.none() | st.binary(max_size=300).map(Blob),
    current_leader=st.none() | st.tuples(int32, int32),
)
topics = st.lists(
    st.builds(
        FetchTopicData,
        topic=st.text(max_size=20),
        partitions=st.lists(partitions, max_size=4),
    ),
    max_size=4,
)


def _leader(current_leader: tuple[int, int] | None) -> dict[str, Any]:
    """The leader hint as kio's values (none: the field's default, not written)."""
    if current_leader is None:
        return {}
    leader_id, leader_epoch = current_leader
    return {"current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch}}


def _kio_body(version: int, topic_data: list[FetchTopicData], session_id: int) -> bytes:
    cls = response_schema(1, version)
    response = build_entity(
        cls,
        {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": session_id,
            "responses": [
                {
                    "topic": t.topic,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": p.error_code,
                            "high_watermark": p.high_watermark,
                            "last_stable_offset": p.last_stable_offset,
                            "log_start_offset": p.log_start_offset,
                            "aborted_transactions": None
                            if p.aborted_transactions is None
                            else [
                                {"producer_id": pid, "first_offset": first}
                                for pid, first in p.aborted_transactions
                            ],
                            "preferred_read_replica": -1,
                            "records": b"" if p.records is None else p.records.data,  # type: ignore[attr-defined]
                            **_leader(p.current_leader),
                        }
                        for p in t.partitions
                    ],
                }
                for t in topic_data
            ],
        },
    )
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, response)
    return buffer.getvalue()


def _joined(chunks: list[object]) -> bytes:
    return b"".join(c if isinstance(c, bytes) else c.data for c in chunks)  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(FETCH_MIN_VERSION, FETCH_MAX_VERSION + 1))
@settings(max_examples=EXAMPLES_PER_VERSION)
@given(topic_data=topics, session_id=int32, correlation_id=int32)
def test_matches_kio_byte_for_byte(
    version: int, topic_data: list[FetchTopicData], session_id: int, correlation_id: int
) -> None:
    frame = encode_fetch_response(correlation_id, version, topic_data, session_id=session_id)
    data = _joined(frame.chunks)
    assert len(data) == frame.total_bytes
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    assert struct.unpack_from(">i", data, 4) == (correlation_id,)
    header_bytes = 4 + 4 + (1 if version >= FLEXIBLE_VERSION else 0)
    assert data[header_bytes:] == _kio_body(version, topic_data, session_id)


def test_record_slices_are_chunks_of_their_own() -> None:
    records = Blob(b"x" * 100)
    frame = encode_fetch_response(
        7, 12, [FetchTopicData("t", [FetchPartitionData(0, records=records)])]
    )
    assert records in frame.chunks
    assert all(isinstance(c, bytes) or c is records for c in frame.chunks)


def test_versions_outside_4_to_12_are_refused() -> None:
    with pytest.raises(ValueError, match="v13"):
        encode_fetch_response(1, 13, [])


follower_partitions = st.lists(st.tuples(int32, int32, int64, int64, int32), max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    int32,
    st.text(max_size=10),
    int32,
    int32,
    int32,
    int32,
    st.lists(st.tuples(st.text(max_size=10), follower_partitions), max_size=3),
)
def test_a_follower_fetch_request_is_the_bytes_kio_writes(
    correlation_id: int,
    client_id: str,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: list[tuple[str, list[FollowerFetchPartitionData]]],
) -> None:
    values = {
        "replica_id": replica_id,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": fetch_offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": log_start_offset,
                        "partition_max_bytes": part_max,
                    }
                    for partition, leader_epoch, fetch_offset, log_start_offset, part_max in (
                        partitions
                    )
                ],
            }
            for topic, partitions in topics
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    entity = build_entity(request_schema(1, FOLLOWER_FETCH_VERSION), values)
    expected = encode_request(correlation_id, entity, client_id=client_id)
    encoded = encode_follower_fetch_request(
        correlation_id,
        client_id=client_id,
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=topics,
    )
    assert encoded == expected
