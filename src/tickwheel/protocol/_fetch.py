"""Fetch encoded by hand: the response, so record bytes are never copied by an
encoder, and the follower's request, which a follower sends once per round trip.

A Fetch response is mostly record batches read from the log. kio's encoder would
push them through an in-memory buffer (two copies of every byte, ~200 µs per MB);
here the response is a list of chunks instead: small ``bytes`` for the fixed-width
fields and, between them, the log's record slices themselves (any object with a
``length``), which the server sends with ``sendfile`` or from a memoryview. Only the
size of each slice is needed to write the length prefixes.

Wire layout, versions 4-12 (v12 is the first flexible version: compact strings and
arrays, and an empty tagged-field section after each struct; of Fetch's tagged fields
only a partition's ``current_leader``, the leader hint of KIP-951, is ever written, and
only beside NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH)::

    throttle_time_ms int32 | error_code int16 (v7+) | session_id int32 (v7+)
    [topic string
      [partition_index int32 | error_code int16 | high_watermark int64
       last_stable_offset int64 | log_start_offset int64 (v5+)
       aborted_transactions [producer_id int64 | first_offset int64] (nullable)
       preferred_read_replica int32 (v11+) | records bytes (nullable)]]

The follower's request (``encode_follower_fetch_request``) is Fetch v12 as Kafka's
followers send it: request header v2, the follower's id as ``replica_id``, no fetch
session, read_uncommitted, no forgotten topics, no rack, no tagged field (its only one
at v12, ``cluster_id``, is null). Every follower sends one for every replication
round trip, so it is written with ``struct``, in a few µs; kio's Python writer would
take tens of µs, which would be most of what replication adds to a message's CPU. The
bytes are kio's (``tests/protocol/test_fetch.py`` compares them over generated
requests)::

    replica_id int32 | max_wait_ms int32 | min_bytes int32 | max_bytes int32
    isolation_level int8 | session_id int32 | session_epoch int32
    [topic string
      [partition int32 | current_leader_epoch int32 | fetch_offset int64
       last_fetched_epoch int32 | log_start_offset int64 | partition_max_bytes int32]]
    forgotten_topics_data [] | rack_id string

Pure functions over immutable inputs; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from tickwheel.protocol._api_keys import ApiKey
from tickwheel.protocol._codec import response_header_bytes
from tickwheel.protocol._framing import size_prefix, uvarint
from tickwheel.protocol._leader_hints import current_leader_tag

FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 12
_FIRST_FLEXIBLE_VERSION = 12
_FIRST_LOG_START_OFFSET_VERSION = 5
_FIRST_SESSION_VERSION = 7
_FIRST_PREFERRED_REPLICA_VERSION = 11
_NO_PREFERRED_REPLICA = -1
_CURRENT_LEADER_TAG = 1
_EMPTY_TAGGED_FIELDS = b"\x00"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_TOP_V7 = struct.Struct(">ihi")
_PARTITION_HEAD = struct.Struct(">ihqq")
_INT64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")
_NULL_LEGACY_ARRAY = _INT32.pack(-1)
_NULL_COMPACT = b"\x00"

FOLLOWER_FETCH_VERSION = 12
_FETCH_KEY: Final[int] = int(ApiKey.FETCH)
_REQUEST_HEADER_PREFIX = struct.Struct(">ihhi")
_FOLLOWER_FETCH_TOP = struct.Struct(">iiiibii")
_FOLLOWER_FETCH_PARTITION = struct.Struct(">iiqiqib")
_READ_UNCOMMITTED = 0
_NO_SESSION = 0
_FULL_FETCH_EPOCH = -1
_NO_LAST_FETCHED_EPOCH = -1
# forgotten_topics_data [] | rack_id "" | the request's empty tagged fields
_FOLLOWER_FETCH_TAIL = b"\x01\x01\x00"

FollowerFetchPartitionData = tuple[int, int, int, int, int]
"""One partition of a follower's fetch: partition, current leader epoch, fetch offset,
log start offset, partition max bytes."""


class RecordsSource(Protocol):
    """Record bytes the server knows how to send; the encoder needs only their size."""

    @property
    def length(self) -> int:
        """Number of bytes."""
        ...


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    """One partition of a Fetch response. ``records`` None means no records (empty);
    ``current_leader`` (leader id, epoch) is the leader hint (v12+; None: none)."""

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    records: RecordsSource | None = None
    current_leader: tuple[int, int] | None = None


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
            if p.current_leader is not None and flexible:
                out.raw(current_leader_tag(_CURRENT_LEADER_TAG, p.current_leader))
            else:
                out.tagged_fields()
        out.tagged_fields()
    out.tagged_fields()
    out.flush()
    prefix = size_prefix(out.total)
    return FetchResponseFrame(chunks=[prefix, *out.chunks], total_bytes=out.total + len(prefix))


def encode_follower_fetch_request(
    correlation_id: int,
    *,
    client_id: str,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: Sequence[tuple[str, Sequence[FollowerFetchPartitionData]]],
) -> bytes:
    """A follower's Fetch v12 request frame, size prefix included."""
    client = client_id.encode()
    parts: list[bytes] = [
        b"",
        _INT16.pack(len(client)),
        client,
        _EMPTY_TAGGED_FIELDS,
        _FOLLOWER_FETCH_TOP.pack(
            replica_id,
            max_wait_ms,
            min_bytes,
            max_bytes,
            _READ_UNCOMMITTED,
            _NO_SESSION,
            _FULL_FETCH_EPOCH,
        ),
        uvarint(len(topics) + 1),
    ]
    for topic, partitions in topics:
        name = topic.encode()
        parts.append(uvarint(len(name) + 1))
        parts.append(name)
        parts.append(uvarint(len(partitions) + 1))
        for partition, leader_epoch, fetch_offset, log_start_offset, partition_max in partitions:
            parts.append(
                _FOLLOWER_FETCH_PARTITION.pack(
                    partition,
                    leader_epoch,
                    fetch_offset,
                    _NO_LAST_FETCHED_EPOCH,
                    log_start_offset,
                    partition_max,
                    0,  # the partition's empty tagged fields
                )
            )
        parts.append(_EMPTY_TAGGED_FIELDS)
    parts.append(_FOLLOWER_FETCH_TAIL)
    size = sum(map(len, parts)) + _REQUEST_HEADER_PREFIX.size - _INT32.size
    parts[0] = _REQUEST_HEADER_PREFIX.pack(size, _FETCH_KEY, FOLLOWER_FETCH_VERSION, correlation_id)
    return b"".join(parts)
