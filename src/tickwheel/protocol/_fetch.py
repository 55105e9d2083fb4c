"""The Fetch response, encoded by hand so record bytes are never copied by an encoder.

A Fetch response is mostly record batches read from the log. kio's encoder would
push them through an in-memory buffer (two copies of every byte, ~200 µs per MB);
here the response is a list of chunks instead: small ``bytes`` for the fixed-width
fields and, between them, the log's record slices themselves (any object with a
``length``), which the server sends with ``sendfile`` or from a memoryview. Only the
size of each slice is needed to write the length prefixes.

Wire layout, versions 4-12 (v12 is the first flexible version: compact strings and
arrays, and an empty tagged-field section after each struct; none of Fetch's tagged
fields is ever written, so old librdkafka has nothing to mis-skip)::

    throttle_time_ms int32 | error_code int16 (v7+) | session_id int32 (v7+)
    [topic string
      [partition_index int32 | error_code int16 | high_watermark int64
       last_stable_offset int64 | log_start_offset int64 (v5+)
       aborted_transactions [producer_id int64 | first_offset int64] (nullable)
       preferred_read_replica int32 (v11+) | records bytes (nullable)]]

Pure functions over immutable inputs; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tickwheel.protocol._codec import response_header_bytes
from tickwheel.protocol._framing import size_prefix, uvarint

FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 12
_FIRST_FLEXIBLE_VERSION = 12
_FIRST_LOG_START_OFFSET_VERSION = 5
_FIRST_SESSION_VERSION = 7
_FIRST_PREFERRED_REPLICA_VERSION = 11
_NO_PREFERRED_REPLICA = -1
_EMPTY_TAGGED_FIELDS = b"\x00"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_TOP_V7 = struct.Struct(">ihi")
_PARTITION_HEAD = struct.Struct(">ihqq")
_INT64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")
_NULL_LEGACY_ARRAY = _INT32.pack(-1)
_NULL_COMPACT = b"\x00"


class RecordsSource(Protocol):
    """Record bytes the server knows how to send; the encoder needs only their size."""

    @property
    def length(self) -> int:
        """Number of bytes."""
        ...


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    """One partition of a Fetch response. ``records`` None means no records (empty)."""

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    records: RecordsSource | None = None


@dataclass(frozen=True, slots=True)
class FetchTopicData:
    """One topic of a Fetch response."""

    topic: str
    partitions: Sequence[FetchPartitionData]


@dataclass(frozen=True, slots=True)
class FetchResponseFrame:
    """A whole response frame as chunks; ``total_bytes`` includes the size prefix."""

    chunks: list[bytes | RecordsSource] = field(default_factory=list)
    total_bytes: int = 0


class _Writer:
    """Accumulates fixed fields into the current bytes chunk; slices become own chunks."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.chunks: list[bytes | RecordsSource] = []
        self.pending = bytearray()
        self.total = 0

    def raw(self, data: bytes) -> None:
        self.pending += data

    def array_length(self, count: int | None) -> None:
        if self.flexible:
            self.raw(_NULL_COMPACT if count is None else uvarint(count + 1))
        else:
            self.raw(_NULL_LEGACY_ARRAY if count is None else _INT32.pack(count))

    def string(self, value: str) -> None:
        encoded = value.encode()
        length = uvarint(len(encoded) + 1) if self.flexible else _INT16.pack(len(encoded))
        self.raw(length + encoded)

    def records(self, source: RecordsSource | None) -> None:
        size = 0 if source is None else source.length
        self.raw(uvarint(size + 1) if self.flexible else _INT32.pack(size))
        if size:
            assert source is not None
            self.flush()
            self.chunks.append(source)
            self.total += size

    def tagged_fields(self) -> None:
        if self.flexible:
            self.raw(_EMPTY_TAGGED_FIELDS)

    def flush(self) -> None:
        if self.pending:
            self.chunks.append(bytes(self.pending))
            self.total += len(self.pending)
            self.pending.clear()


def encode_fetch_response(
    correlation_id: int,
    api_version: int,
    topics: Sequence[FetchTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> FetchResponseFrame:
    """The Fetch response frame at ``api_version`` (4-12), as chunks."""
    if not FETCH_MIN_VERSION <= api_version <= FETCH_MAX_VERSION:
        raise ValueError(f"Fetch v{api_version} is not encoded here")
    flexible = api_version >= _FIRST_FLEXIBLE_VERSION
    out = _Writer(flexible)
    out.raw(response_header_bytes(correlation_id, flexible_header=flexible))
    if api_version >= _FIRST_SESSION_VERSION:
        out.raw(_TOP_V7.pack(throttle_time_ms, error_code, session_id))
    else:
        out.raw(_INT32.pack(throttle_time_ms))
    out.array_length(len(topics))
    for topic in topics:
        out.string(topic.topic)
        out.array_length(len(topic.partitions))
        for p in topic.partitions:
            out.raw(
                _PARTITION_HEAD.pack(
                    p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                )
            )
            if api_version >= _FIRST_LOG_START_OFFSET_VERSION:
                out.raw(_INT64.pack(p.log_start_offset))
            aborted = p.aborted_transactions
            out.array_length(None if aborted is None else len(aborted))
            for producer_id, first_offset in aborted or ():
                out.raw(_ABORTED.pack(producer_id, first_offset))
                out.tagged_fields()
            if api_version >= _FIRST_PREFERRED_REPLICA_VERSION:
                out.raw(_INT32.pack(_NO_PREFERRED_REPLICA))
            out.records(p.records)
            out.tagged_fields()
        out.tagged_fields()
    out.tagged_fields()
    out.flush()
    prefix = size_prefix(out.total)
    return FetchResponseFrame(chunks=[prefix, *out.chunks], total_bytes=out.total + len(prefix))
