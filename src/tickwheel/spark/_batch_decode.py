"""Record batches as bytes to Arrow columns: the source's decoder.

``decode_fetch`` takes the records bytes of one partition of a Fetch response and
returns ``pyarrow.RecordBatch``\\es in the source's Arrow schema, with no Python object
per record on the way (headers excepted, below). Three steps:

1. Batches (``select_batches``), one Python step per batch: read each v2 header and
   check its framing, magic and CRC (``tickwheel.log.check_batch``); stop at a partial
   batch at the end (a broker cuts a response at its byte limit) or at a batch starting
   at or past the range's end. A read_committed read drops what a Java or librdkafka
   consumer at that isolation drops: control batches (transaction markers) always, and
   the transactional batches of aborted transactions, found as Kafka's consumer finds
   them -- the response's ``aborted_transactions`` (producer id, first offset), taken
   in first-offset order as the batches pass them, mark a producer aborted until its
   ABORT marker goes by. Batches wholly before the range and empty batches (a
   compacted log keeps some) are dropped too. The offset to fetch next is the one after
   the last whole batch, kept or not, so markers and aborted batches move a read on.
2. Records (``_record_scan.scan_records``, its compiled twin when the build made one:
   ``_scan_build``), one loop step per record: where each
   record's body starts and ends. Compressed batches are decompressed once each
   (``tickwheel.log.records_section``) into one buffer per output chunk (an "arena");
   uncompressed ones are read in place from the response's bytes.
3. Columns, with whole-array numpy operations over every record of a chunk: each
   varint field (timestamp delta, offset delta, key length, value length, header count)
   is read at once for all records, one pass per byte of varint; offset and timestamp
   are the batch's base plus the deltas (LogAppendTime batches give every record the
   batch's max timestamp, type 1); records outside ``[from_offset, until_offset)``
   (the first and last batches may reach past the range) are masked out. Keys and
   values become Arrow binary arrays without a copy per record: an "interleaved"
   binary array is laid over the arena itself (``pa.Array.from_buffers``) whose even
   elements are the keys (or values) and odd elements the bytes between them, and
   Arrow's ``take`` of the even elements copies them into the contiguous binary column
   Spark needs, in C. A null key or value (length -1) is a null.

Step 1 runs when a fetch is decoded (it gives the offset to fetch next); steps 2 and 3
run one chunk at a time, as the caller takes the Arrow batches. The Spark task's JVM
thread, which waits while its Python worker fetches and decodes, so gets the first
rows of a fetch after one chunk is decoded rather than all of them.

Headers (``includeHeaders``) are the exception: records with headers are decoded one
by one into Python values; a record without headers gets a null ``headers``, as from
librdkafka's ``Message.headers()`` and Spark's connector.

Malformed data (bad framing, CRC, varints or lengths that leave their record) raises
``SparkKafkaError`` naming the partition and batch offset.

Concurrency: pure functions over immutable bytes; thread-safe.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from tickwheel.log import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    ControlType,
    LogError,
    check_batch,
    read_control_batch,
    read_varint,
    records_section,
)
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._scan_build import RecordScanError, scan_records
from tickwheel.spark._schema import source_schema

# Spark takes Arrow batches of tens of thousands of rows fastest: smaller ones pay its
# per-batch cost, larger ones hold more memory per task.
ARROW_BATCH_ROWS: Final = 50_000
_NO_COMPRESSION: Final = 0
_CODEC_MASK: Final = 0x07
_LENGTH_FIELD: Final = slice(8, 12)
_MS_TO_US: Final = 1000
_NULL_LENGTH: Final = -1
# Arrow binary arrays have 32-bit offsets: an arena must stay below 2 GiB.
_MAX_ARENA_BYTES: Final = (1 << 31) - 1
# Varint sizes: lengths and deltas are varint32, the timestamp delta a varint64.
_VARINT32_BYTES: Final = 5
_VARINT64_BYTES: Final = 10
_PAYLOAD_BITS: Final = 7

Int64Array = npt.NDArray[np.int64]


@functools.cache
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects of the source's batches (UTC timestamps)."""
    return to_arrow_schema(source_schema(include_headers=include_headers), timezone="UTC")


@dataclass(frozen=True, slots=True)
class FetchWindow:
    """What the records of one fetch are decoded for: a partition, the offsets still
    wanted (``[from_offset, until_offset)``), the isolation level and the columns."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    read_committed: bool
    include_headers: bool

    def describe(self) -> str:
        """The partition as Kafka's messages name it."""
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class DecodedFetch:
    """The rows of one fetch and the offset to fetch next (after the last whole batch).

    ``batches`` decodes one Arrow batch at a time, as it is taken, so that Spark gets the
    first rows of a fetch while the rest is still bytes; it raises ``SparkKafkaError``
    at a chunk it finds corrupt. Take it once."""

    batches: Iterator[pa.RecordBatch]
    next_offset: int


def decode_fetch(
    records: bytes,
    aborted: Sequence[tuple[int, int]],
    window: FetchWindow,
    *,
    max_rows: int = ARROW_BATCH_ROWS,
) -> DecodedFetch:
    """The rows of ``records`` inside ``window``, in Arrow batches of about ``max_rows``
    rows (a batch is never split); ``aborted`` is the response's (producer id, first
    offset) list, used when ``window.read_committed``. The batches' headers are checked
    here, their records as ``batches`` is taken."""
    view = memoryview(records)
    try:
        kept, next_offset = select_batches(view, aborted, window)
    except (LogError, IndexError, ValueError) as exc:
        raise _corrupt(window, exc) from exc
    return DecodedFetch(_decode_chunks(records, view, kept, window, max_rows), next_offset)


def _decode_chunks(
    records: bytes,
    view: memoryview,
    kept: list[tuple[int, BatchHeader]],
    window: FetchWindow,
    max_rows: int,
) -> Iterator[pa.RecordBatch]:
    """One Arrow batch per run of whole batches of ``kept`` holding ``max_rows`` rows or
    more (the last run fewer), empty ones left out."""
    begin = 0
    while begin < len(kept):
        end, rows = begin, 0
        while end < len(kept) and rows < max_rows:
            rows += kept[end][1].records_count
            end += 1
        try:
            batch = _decode_chunk(records, view, kept[begin:end], window)
        except (LogError, RecordScanError, IndexError, ValueError) as exc:
            raise _corrupt(window, exc) from exc
        if batch.num_rows:
            yield batch
        begin = end


def _corrupt(window: FetchWindow, exc: Exception) -> SparkKafkaError:
    return SparkKafkaError(f"corrupt records in {window.describe()}: {exc}")


def select_batches(
    data: memoryview, aborted: Sequence[tuple[int, int]], window: FetchWindow
) -> tuple[list[tuple[int, BatchHeader]], int]:
    """The (position, header) of each batch of ``data`` with records to decode, and the
    offset after the last whole batch (at least ``window.from_offset``); see step 1 of
    the module doc."""
    pending = sorted(aborted, key=lambda entry: entry[1])
    next_pending = 0
    aborted_producers: set[int] = set()
    kept: list[tuple[int, BatchHeader]] = []
    next_offset = window.from_offset
    position = 0
    total = len(data)
    while total - position >= LOG_OVERHEAD:
        length = int.from_bytes(data[position:][_LENGTH_FIELD], "big", signed=True)
        if position + LOG_OVERHEAD + length > total:
            break
        header = check_batch(data, position, total - position)
        start, position = position, position + header.size_bytes
        if header.base_offset >= window.until_offset:
            break
        next_offset = max(next_offset, header.last_offset + 1)
        attributes = header.attributes
        control = attributes & CONTROL_FLAG_MASK
        if window.read_committed and header.producer_id >= 0:
            while next_pending < len(pending) and pending[next_pending][1] <= header.last_offset:
                aborted_producers.add(pending[next_pending][0])
                next_pending += 1
            if control:
                if _is_abort_marker(data[start:position], header):
                    aborted_producers.discard(header.producer_id)
            elif attributes & TRANSACTIONAL_FLAG_MASK and header.producer_id in aborted_producers:
                continue
        if control or header.records_count == 0 or header.last_offset < window.from_offset:
            continue
        kept.append((start, header))
    return kept, next_offset


def _is_abort_marker(batch: memoryview, header: BatchHeader) -> bool:
    marker = read_control_batch(batch, header)
    return marker is not None and marker.control_type == ControlType.ABORT


@dataclass(slots=True)
class _Chunk:
    """The batches of one output chunk laid out in one arena, and per-batch fields."""

    arena: bytes
    starts: list[int]
    section_ends: list[int]
    counts: list[int]
    base_offsets: list[int]
    base_timestamps: list[int]
    max_timestamps: list[int]
    log_append_time: list[bool]


def _lay_out(records: bytes, view: memoryview, chunk: list[tuple[int, BatchHeader]]) -> _Chunk:
    """Step 2: the arena (the response's bytes when nothing is compressed) and where
    each record starts in it."""
    compressed = any(h.attributes & _CODEC_MASK != _NO_COMPRESSION for _, h in chunk)
    spans: list[tuple[int, int]] = []
    if compressed:
        sections: list[bytes | memoryview] = []
        size = 0
        for position, header in chunk:
            if header.attributes & _CODEC_MASK == _NO_COMPRESSION:
                section: bytes | memoryview = view[
                    position + RECORD_BATCH_OVERHEAD : position + header.size_bytes
                ]
            else:
                section = records_section(view[position : position + header.size_bytes], header)
            sections.append(section)
            spans.append((size, size + len(section)))
            size += len(section)
        arena = b"".join(sections)
    else:
        arena = records
        spans = [(p + RECORD_BATCH_OVERHEAD, p + h.size_bytes) for p, h in chunk]
    if len(arena) > _MAX_ARENA_BYTES:
        raise ValueError(f"{len(arena)} bytes of records in one chunk: more than Arrow's 2 GiB")
    laid = _Chunk(arena, [], [], [], [], [], [], [])
    for (begin, end), (_, header) in zip(spans, chunk, strict=True):
        if scan_records(arena, begin, header.records_count, laid.starts) != end:
            raise ValueError(f"the records of the batch at {header.base_offset} do not fill it")
        laid.section_ends.append(end)
        laid.counts.append(header.records_count)
        laid.base_offsets.append(header.base_offset)
        laid.base_timestamps.append(header.base_timestamp)
        laid.max_timestamps.append(header.max_timestamp)
        laid.log_append_time.append(bool(header.attributes & TIMESTAMP_TYPE_MASK))
    return laid


def _varints(
    buffer: npt.NDArray[np.uint8], positions: Int64Array, max_bytes: int
) -> tuple[Int64Array, Int64Array]:
    """The zig-zag varint at each of ``positions`` and the position after each, one
    whole-array pass per varint byte (only the varints still going take part)."""
    byte = buffer[positions]
    raw = (byte & 0x7F).astype(np.uint64)
    after = positions + 1
    going = np.flatnonzero(byte & 0x80)
    shift = _PAYLOAD_BITS
    while going.size:
        if shift >= _PAYLOAD_BITS * max_bytes:
            raise ValueError(f"a varint longer than {max_bytes} bytes")
        byte = buffer[after[going]]
        raw[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[going] += 1
        going = going[(byte & 0x80) != 0]
        shift += _PAYLOAD_BITS
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, after


def _check_within(positions: Int64Array, ends: Int64Array, what: str) -> None:
    if bool((positions > ends).any()):
        raise ValueError(f"a record's {what} runs past the record")


def _binary_column(
    arena: pa.Buffer, starts: Int64Array, lengths: Int64Array, rows: Int64Array
) -> pa.Array:
    """The binary column of the ``rows`` of the fields at ``starts`` (``lengths`` -1 is
    null), copied out of ``arena`` by Arrow's ``take`` over an interleaved array."""
    count = len(starts)
    sizes = np.maximum(lengths, 0)
    offsets = np.empty(2 * count + 1, dtype=np.int32)
    offsets[0 : 2 * count : 2] = starts
    offsets[1 : 2 * count : 2] = starts + sizes
    offsets[2 * count] = offsets[2 * count - 1]
    nulls = lengths < 0
    null_count = int(np.count_nonzero(nulls))
    validity = None
    if null_count:
        valid = np.ones(2 * count, dtype=np.bool_)
        valid[0::2] = ~nulls
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    interleaved = pa.Array.from_buffers(
        pa.binary(), 2 * count, [validity, pa.py_buffer(offsets), arena], null_count
    )
    return interleaved.take(pa.array(rows * 2))


def _decode_chunk(
    records: bytes, view: memoryview, chunk: list[tuple[int, BatchHeader]], window: FetchWindow
) -> pa.RecordBatch:
    """Step 3: one Arrow batch from the records of ``chunk``."""
    laid = _lay_out(records, view, chunk)
    buffer = np.frombuffer(laid.arena, dtype=np.uint8)
    starts = np.array(laid.starts, dtype=np.int64)
    counts = np.array(laid.counts, dtype=np.int64)
    lengths, bodies = _varints(buffer, starts, _VARINT32_BYTES)
    ends = bodies + lengths
    # Each record ends where the next starts, the last of a batch where the batch does.
    expected_ends = np.empty_like(ends)
    expected_ends[:-1] = starts[1:]
    expected_ends[np.cumsum(counts) - 1] = laid.section_ends
    if bool((lengths < 1).any()) or not np.array_equal(ends, expected_ends):
        raise ValueError("the records' lengths do not frame their batch")
    # The body: attributes (one byte, unused in v2), then the varint fields.
    timestamp_deltas, after = _varints(buffer, bodies + 1, _VARINT64_BYTES)
    offset_deltas, after = _varints(buffer, after, _VARINT32_BYTES)
    key_lengths, key_starts = _varints(buffer, after, _VARINT32_BYTES)
    _check_within(key_starts, ends, "key length")
    after = key_starts + np.maximum(key_lengths, 0)
    _check_within(after, ends, "key")
    value_lengths, value_starts = _varints(buffer, after, _VARINT32_BYTES)
    _check_within(value_starts, ends, "value length")
    value_ends = value_starts + np.maximum(value_lengths, 0)
    if bool((value_ends >= ends).any()):
        raise ValueError("a record's value leaves no room for its header count")
    if bool((key_lengths < _NULL_LENGTH).any() or (value_lengths < _NULL_LENGTH).any()):
        raise ValueError("a record has a negative key or value length")
    offsets = np.repeat(np.array(laid.base_offsets, dtype=np.int64), counts) + offset_deltas
    timestamps_ms = np.repeat(np.array(laid.base_timestamps, dtype=np.int64), counts)
    timestamps_ms += timestamp_deltas
    log_append = np.repeat(np.array(laid.log_append_time, dtype=np.bool_), counts)
    if any(laid.log_append_time):
        max_ms = np.repeat(np.array(laid.max_timestamps, dtype=np.int64), counts)
        timestamps_ms = np.where(log_append, max_ms, timestamps_ms)
    wanted = (offsets >= window.from_offset) & (offsets < window.until_offset)
    rows = np.flatnonzero(wanted)
    kept = len(rows)
    schema = arrow_schema(window.include_headers)
    arena = pa.py_buffer(laid.arena)
    stamps_us = np.ascontiguousarray(timestamps_ms[rows] * _MS_TO_US)
    columns = [
        _binary_column(arena, key_starts, key_lengths, rows),
        _binary_column(arena, value_starts, value_lengths, rows),
        pa.repeat(pa.scalar(window.topic, schema.field(2).type), kept),
        pa.repeat(pa.scalar(window.partition, schema.field(3).type), kept),
        pa.array(np.ascontiguousarray(offsets[rows]), schema.field(4).type),
        pa.Array.from_buffers(schema.field(5).type, kept, [None, pa.py_buffer(stamps_us)]),
        pa.array(log_append[rows].astype(np.int32), schema.field(6).type),
    ]
    if window.include_headers:
        counts_at, _ = _varints(buffer, value_ends, _VARINT32_BYTES)
        columns.append(
            _headers_column(laid.arena, value_ends, counts_at, ends, rows, schema.field(7).type)
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _headers_column(
    arena: bytes,
    value_ends: Int64Array,
    header_counts: Int64Array,
    ends: Int64Array,
    rows: Int64Array,
    headers_type: pa.DataType,
) -> pa.Array:
    """The headers of the ``rows``: decoded one record at a time, for records with any."""
    with_headers = np.flatnonzero(header_counts[rows] != 0)
    if not with_headers.size:
        return pa.nulls(len(rows), headers_type)
    if bool((header_counts < 0).any()):
        raise ValueError("a negative header count")
    values: list[list[dict[str, str | bytes | None]] | None] = [None] * len(rows)
    for out_index in with_headers.tolist():
        record = int(rows[out_index])
        values[out_index] = _record_headers(arena, int(value_ends[record]), int(ends[record]))
    return pa.array(values, headers_type)


def _record_headers(
    arena: bytes, position: int, end: int
) -> list[dict[str, str | bytes | None]] | None:
    """The headers of one record whose header count is at ``position``."""
    count, position = read_varint(arena, position)
    headers: list[dict[str, str | bytes | None]] = []
    for _ in range(count):
        key_length, position = read_varint(arena, position)
        if key_length < 0:
            raise ValueError("a header without a key")
        key = arena[position : position + key_length].decode("utf-8", "replace")
        position += key_length
        value_length, position = read_varint(arena, position)
        value = None
        if value_length >= 0:
            value = arena[position : position + value_length]
            position += value_length
        headers.append({"key": key, "value": value})
    if position != end:
        raise ValueError("a record's headers do not end with the record")
    return headers
