"""Record decoding and encoding, and the codecs, against the batch encoder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.bench._batches import make_keyed_batch
from tickwheel.record import (
    CorruptRecordError,
    compress,
    decode_records,
    decompress,
    encode_record,
    null_key_indexes,
    parse_header,
    read_varint,
    record_keys,
    record_prefixes,
    write_varint,
)

RECORDS = st.lists(
    st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=9000)),
    min_size=1,
    max_size=8,
)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varints_round_trip(value: int) -> None:
    encoded = write_varint(value) + b"\x01"
    assert read_varint(encoded, 0) == (value, len(encoded) - 1)


@given(RECORDS, st.sampled_from([0, 1, 2, 3, 4]))
def test_records_decode_as_encoded(
    records: list[tuple[bytes | None, bytes | None]], codec: int
) -> None:
    batch = make_keyed_batch(records, codec=codec)
    header = parse_header(batch, 0)
    decoded = decode_records(batch, header)
    assert [(r.key, r.value) for r in decoded] == records
    assert [(r.offset_delta, r.key) for r in decoded] == record_keys(batch, header)
    assert null_key_indexes(batch, header) == [
        i for i, (key, _) in enumerate(records) if key is None
    ]
    assert record_prefixes(batch, header, 5) == [
        (None if key is None else key[:5], None if value is None else value[:5])
        for key, value in records
    ]
    for record in decoded:
        assert encode_record(record, record.timestamp_delta) == record.raw


@given(st.binary(max_size=100_000), st.sampled_from([0, 1, 2, 3, 4]))
def test_codecs_round_trip(data: bytes, codec: int) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_raw_snappy_without_the_xerial_framing_is_read() -> None:
    import cramjam  # noqa: PLC0415 - the codec's own library, for a raw block

    assert decompress(2, bytes(cramjam.snappy.compress_raw(b"abc" * 100))) == b"abc" * 100


def test_garbage_records_raise_corrupt_record() -> None:
    batch = bytearray(make_keyed_batch([(b"k", b"v")]))
    del batch[-3:]
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(batch), parse_header(batch, 0)._replace(batch_length=len(batch) - 12))
