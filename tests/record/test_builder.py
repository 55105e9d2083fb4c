"""The builder and the batch walk together: what is built is read back as it was given."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tickwheel.record import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    GZIP,
    LOG_OVERHEAD,
    LZ4,
    NO_COMPRESSION,
    RECORD_BATCH_OVERHEAD,
    SNAPPY,
    TRANSACTIONAL_FLAG_MASK,
    ZSTD,
    BatchHeader,
    SimpleRecord,
    build_batch,
    check_batch,
    decode_headers,
    decode_records,
    iter_batches,
    whole_batches_end,
)

_TIMESTAMPS = st.integers(0, 2**62)
_HEADERS = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=40)), max_size=4
).map(tuple)
_RECORDS = st.lists(
    st.builds(
        SimpleRecord,
        st.none() | st.binary(max_size=60),
        st.none() | st.binary(max_size=300),
        _TIMESTAMPS,
        _HEADERS,
    ),
    min_size=1,
    max_size=6,
)
_BATCH_OPTIONS = st.fixed_dictionaries(
    {
        "codec": st.sampled_from([NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD]),
        "transactional": st.booleans(),
        "control": st.booleans(),
        "producer_id": st.integers(-1, 2**63 - 1),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, 2**31 - 1),
    }
)


def _read_back(batch: bytes, header: BatchHeader) -> list[SimpleRecord]:
    return [
        SimpleRecord(
            record.key,
            record.value,
            header.base_timestamp + record.timestamp_delta,
            decode_headers(record.headers),
        )
        for record in decode_records(batch, header)
    ]


@given(st.lists(st.tuples(_RECORDS, _BATCH_OPTIONS), min_size=1, max_size=4), st.data())
def test_built_batches_are_walked_and_decoded_back(
    batches: list[tuple[list[SimpleRecord], dict[str, Any]]], data: st.DataObject
) -> None:
    built = [build_batch(records, **options) for records, options in batches]
    payload = b"".join(built)
    cut = data.draw(st.integers(1, len(built[-1]) - 1), label="bytes cut off the last batch")

    walked = list(iter_batches(payload))
    assert len(walked) == len(built)
    assert list(iter_batches(payload[:-cut])) == walked[:-1]
    position = 0
    for (at, header), batch, (records, options) in zip(walked, built, batches, strict=True):
        assert at == position
        assert header.size_bytes == len(batch)
        assert check_batch(memoryview(payload), at, len(payload) - at) == header
        assert (header.base_offset, header.partition_leader_epoch) == (0, -1)
        assert header.records_count == len(records)
        assert header.last_offset_delta == len(records) - 1
        assert header.base_timestamp == records[0].timestamp_ms
        assert header.max_timestamp == max(record.timestamp_ms for record in records)
        assert header.attributes & COMPRESSION_CODEC_MASK == options["codec"]
        assert bool(header.attributes & TRANSACTIONAL_FLAG_MASK) == options["transactional"]
        assert bool(header.attributes & CONTROL_FLAG_MASK) == options["control"]
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            options["producer_id"],
            options["producer_epoch"],
            options["base_sequence"],
        )
        assert _read_back(batch, header) == records
        position += len(batch)
    assert whole_batches_end(payload) == (len(payload), walked[-1][1].last_offset + 1)


def test_the_walk_stops_at_a_length_below_the_header() -> None:
    batch = build_batch([SimpleRecord(b"k", b"v", 0)])
    broken = bytearray(batch)
    struct.pack_into(">i", broken, 8, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD - 1)
    assert [at for at, _ in iter_batches(batch + bytes(broken) + batch)] == [0]


def test_the_walk_starts_where_told_and_an_empty_buffer_has_no_batch() -> None:
    batch = build_batch([SimpleRecord(None, b"v", 5)])
    assert [at for at, _ in iter_batches(batch * 3, len(batch))] == [len(batch), 2 * len(batch)]
    assert list(iter_batches(b"")) == []
    assert whole_batches_end(batch[:-1]) == (0, -1)
