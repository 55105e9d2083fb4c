"""The hand-written Fetch response encoder writes exactly what kio's encoder writes."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from tickwheel.protocol import (
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    FetchPartitionData,
    FetchTopicData,
    build_entity,
    encode_fetch_response,
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
)
topics = st.lists(
    st.builds(
        FetchTopicData,
        topic=st.text(max_size=20),
        partitions=st.lists(partitions, max_size=4),
    ),
    max_size=4,
)


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
