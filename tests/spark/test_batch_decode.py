"""The columnar decoder against the log layer's own record iteration.

Batches are built here byte by byte (any codec, headers, offset gaps as compaction
leaves them, LogAppendTime, transactions ended by COMMIT or ABORT markers); the
reference reads each batch with ``tickwheel.log``'s ``decode_records`` and drops what
a read_committed consumer drops, knowing from the model which transactions aborted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.log import build_end_txn_marker, write_varint
from tickwheel.record import compress, decode_records, parse_header
from tickwheel.spark._batch_decode import FetchWindow, decode_fetch
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._record_scan import scan_records

_HEADER = struct.Struct(">qiibIhiqqqhii")
_TRANSACTIONAL = 0x10
_LOG_APPEND_TIME = 0x08
BASE_TIMESTAMP_MS = 1_700_000_000_000
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class RecordSpec:
    offset_gap: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Headers


@dataclass(frozen=True)
class BatchInfo:
    position: int
    control: bool
    # The transaction a data batch belongs to, or -1.
    txn: int


@dataclass
class Stream:
    """Batches as a leader stores them, and what the model knows of each."""

    data: bytearray = field(default_factory=bytearray)
    next_offset: int = 0
    batches: list[BatchInfo] = field(default_factory=list)
    # The response's list: (producer id, first offset) of each aborted transaction.
    aborted: list[tuple[int, int]] = field(default_factory=list)
    aborted_txns: set[int] = field(default_factory=set)
    headers: dict[int, Headers] = field(default_factory=dict)

    def end_txn(self, producer_id: int, txn: int, first_offset: int, abort: bool) -> None:
        marker = bytearray(build_end_txn_marker(producer_id, 0, 0, not abort, 0))
        struct.pack_into(">q", marker, 0, self.next_offset)
        self.batches.append(BatchInfo(len(self.data), True, -1))
        self.data += marker
        self.next_offset += 1
        if abort:
            self.aborted.append((producer_id, first_offset))
            self.aborted_txns.add(txn)


def encode_record(offset_delta: int, spec: RecordSpec) -> bytes:
    body = bytearray(b"\x00")
    body += write_varint(spec.timestamp_delta) + write_varint(offset_delta)
    for part in (spec.key, spec.value):
        body += write_varint(-1) if part is None else write_varint(len(part)) + part
    body += write_varint(len(spec.headers))
    for key, value in spec.headers:
        encoded = key.encode()
        body += write_varint(len(encoded)) + encoded
        body += write_varint(-1) if value is None else write_varint(len(value)) + value
    return write_varint(len(body)) + bytes(body)


def encode_batch(
    base_offset: int,
    records: list[RecordSpec],
    *,
    codec: int,
    log_append_time: bool,
    producer_id: int,
    transactional: bool,
) -> tuple[bytes, list[int]]:
    """A v2 batch and the offset of each record (gaps as compaction leaves them)."""
    deltas: list[int] = []
    delta = 0
    for spec in records:
        delta += spec.offset_gap
        deltas.append(delta)
        delta += 1
    payload = compress(
        codec, b"".join(encode_record(d, s) for d, s in zip(deltas, records, strict=True))
    )
    attributes = codec | (_LOG_APPEND_TIME if log_append_time else 0)
    attributes |= _TRANSACTIONAL if transactional else 0
    max_timestamp = BASE_TIMESTAMP_MS + 99_999 if log_append_time else BASE_TIMESTAMP_MS
    header = bytearray(
        _HEADER.pack(
            base_offset,
            49 + len(payload),
            -1,
            2,
            0,
            attributes,
            deltas[-1],
            BASE_TIMESTAMP_MS,
            max_timestamp,
            producer_id,
            0 if producer_id >= 0 else -1,
            0 if producer_id >= 0 else -1,
            len(records),
        )
    )
    struct.pack_into(">I", header, 17, crc32c.crc32c(bytes(header[21:]) + payload))
    return bytes(header) + payload, [base_offset + d for d in deltas]


def plain_batch(specs: list[RecordSpec]) -> tuple[bytes, list[int]]:
    return encode_batch(
        0, specs, codec=0, log_append_time=False, producer_id=-1, transactional=False
    )


record_specs = st.builds(
    RecordSpec,
    offset_gap=st.sampled_from([0, 0, 0, 1, 3, 200]),
    timestamp_delta=st.one_of(st.integers(0, 100), st.integers(-(2**40), 2**40)),
    key=st.one_of(st.none(), st.binary(max_size=20)),
    value=st.one_of(st.none(), st.binary(max_size=300)),
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
        max_size=2,
    ).map(tuple),
)


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """A partition's batches: plain ones, and transactions of two producers."""
    stream = Stream()
    # producer id -> (transaction, first offset) of its open transaction
    open_txns: dict[int, tuple[int, int]] = {}
    for txn_number in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["plain", "txn", "txn", "end"]))
        producer_id = draw(st.sampled_from([7, 8]))
        if kind == "end":
            if producer_id in open_txns:
                txn, first = open_txns.pop(producer_id)
                stream.end_txn(producer_id, txn, first, abort=draw(st.booleans()))
            continue
        transactional = kind == "txn"
        specs = draw(st.lists(record_specs, min_size=1, max_size=30))
        batch, offsets = encode_batch(
            stream.next_offset,
            specs,
            codec=draw(st.integers(0, 4)),
            log_append_time=draw(st.booleans()),
            producer_id=producer_id if transactional else -1,
            transactional=transactional,
        )
        txn = -1
        if transactional:
            txn, _ = open_txns.setdefault(producer_id, (txn_number, stream.next_offset))
        stream.batches.append(BatchInfo(len(stream.data), False, txn))
        stream.data += batch
        for offset, spec in zip(offsets, specs, strict=True):
            stream.headers[offset] = spec.headers
        stream.next_offset = offsets[-1] + 1
    for producer_id, (txn, first) in sorted(open_txns.items()):
        stream.end_txn(producer_id, txn, first, abort=draw(st.booleans()))
    return stream


Row = tuple[bytes | None, bytes | None, int, int, int, Headers | None]


def reference_rows(stream: Stream, window: FetchWindow, end: int) -> list[Row]:
    """What a consumer reads of ``stream.data[:end]``: the log layer's decoding."""
    rows: list[Row] = []
    data = bytes(stream.data)
    for info in stream.batches:
        position = info.position
        header = parse_header(data, position)
        aborted = info.txn in stream.aborted_txns
        if (
            position + header.size_bytes > end
            or info.control
            or (window.read_committed and aborted)
        ):
            continue
        log_append = bool(header.attributes & _LOG_APPEND_TIME)
        for record in decode_records(data[position : position + header.size_bytes], header):
            offset = header.base_offset + record.offset_delta
            if not window.from_offset <= offset < window.until_offset:
                continue
            stamp = (
                header.max_timestamp
                if log_append
                else header.base_timestamp + record.timestamp_delta
            )
            headers = stream.headers[offset] if window.include_headers else ()
            rows.append(
                (
                    None if record.key is None else bytes(record.key),
                    None if record.value is None else bytes(record.value),
                    offset,
                    stamp * 1000,
                    int(log_append),
                    (headers or None) if window.include_headers else None,
                )
            )
    return rows


def decoded_rows(batches: list[pa.RecordBatch], include_headers: bool) -> list[Row]:
    rows: list[Row] = []
    for batch in batches:
        for row in batch.to_pylist():
            headers = None
            if include_headers and row["headers"] is not None:
                headers = tuple((h["key"], h["value"]) for h in row["headers"])
            rows.append((row["key"], row["value"], row["offset"], 0, row["timestampType"], headers))
        stamps = batch.column(5).cast(pa.int64()).to_pylist()
        for index, stamp in enumerate(stamps, start=len(rows) - batch.num_rows):
            key, value, offset, _, kind, headers = rows[index]
            rows[index] = (key, value, offset, stamp, kind, headers)
    return rows


@settings(max_examples=150, deadline=None)
@given(
    stream=streams(),
    read_committed=st.booleans(),
    include_headers=st.booleans(),
    cut=st.floats(0, 1),
    start=st.floats(0, 1),
    length=st.floats(0, 1),
    max_rows=st.sampled_from([1, 7, 50_000]),
)
def test_decoding_gives_the_rows_a_consumer_reads(
    stream: Stream,
    read_committed: bool,
    include_headers: bool,
    cut: float,
    start: float,
    length: float,
    max_rows: int,
) -> None:
    first = int(start * stream.next_offset)
    until = first + 1 + int(length * (stream.next_offset - first))
    window = FetchWindow("t", 3, first, until, read_committed, include_headers)
    # A broker may cut its answer inside the last batch: only whole batches count.
    end = len(stream.data) if cut > 0.8 else int(cut / 0.8 * len(stream.data))
    decoded = decode_fetch(bytes(stream.data[:end]), stream.aborted, window, max_rows=max_rows)
    batches = list(decoded.batches)
    assert decoded_rows(batches, include_headers) == reference_rows(stream, window, end)
    positions = [info.position for info in stream.batches]
    whole = [p for p in positions if p + parse_header(stream.data, p).size_bytes <= end]
    last_whole = max(
        (p for p in whole if parse_header(stream.data, p).base_offset < until), default=None
    )
    expected_next = first
    if last_whole is not None:
        expected_next = max(first, parse_header(stream.data, last_whole).last_offset + 1)
    assert decoded.next_offset == expected_next
    for batch in batches:
        assert batch.column(2).to_pylist() == ["t"] * batch.num_rows
        assert batch.column(3).to_pylist() == [3] * batch.num_rows


def test_record_scan_finds_each_record_start() -> None:
    specs = [RecordSpec(0, 0, b"k" * n, b"v" * (n * 70), ()) for n in range(5)]
    batch, _ = plain_batch(specs)
    starts: list[int] = []
    end = scan_records(batch, 61, len(specs), starts)
    assert end == len(batch)
    expected = [61]
    for spec in specs[:-1]:
        expected.append(expected[-1] + len(encode_record(0, spec)))
    assert starts == expected


@pytest.mark.parametrize(("position", "byte", "message"), [(66, 0xFF, "CRC"), (16, 1, "magic")])
def test_a_corrupt_batch_is_an_error_naming_the_partition(
    position: int, byte: int, message: str
) -> None:
    batch, _ = plain_batch([RecordSpec(0, 0, b"k", b"v", ())])
    forged = bytearray(batch)
    forged[position] = byte
    window = FetchWindow("t", 0, 0, 1, True, False)
    with pytest.raises(SparkKafkaError, match=rf"corrupt records in t-0: .*{message}"):
        decode_fetch(bytes(forged), [], window)


def test_lengths_that_leave_their_record_are_an_error() -> None:
    spec = RecordSpec(0, 0, b"key", b"value", ())
    batch, _ = plain_batch([spec])
    forged = bytearray(batch)
    # The key length (after length, attributes, timestamp and offset deltas) claims more.
    forged[61 + 4] = 60
    struct.pack_into(">I", forged, 17, crc32c.crc32c(bytes(forged[21:])))
    with pytest.raises(SparkKafkaError, match="runs past the record"):
        list(decode_fetch(bytes(forged), [], FetchWindow("t", 0, 0, 1, True, False)).batches)
