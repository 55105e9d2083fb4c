"""A coordinator's state topic read back: the records of a compacted internal topic.

The transaction coordinator (``__transaction_state``) and the share coordinator
(``__share_group_state``) keep their state the same way: one keyed record per change,
each in an uncompressed v2 batch of its own, the last value of a key winning and a null
value (a tombstone) removing it. When a broker becomes the leader of one of their
partitions it reads the partition from its log start to its log **end** -- not the high
watermark: a new leader's high watermark may lag records it already holds -- and
rebuilds its cache. ``read_to_end`` is that read; ``iter_records`` and
``next_batch_offset`` take a chunk of the log apart.

Pure functions over bytes and a ``Log`` read; the caller owns the log's thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from tickwheel.log import Log, read_varint

_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_LOG_OVERHEAD = 12
_ATTRIBUTES_AT = 21
_LAST_OFFSET_DELTA_AT = 23
_RECORD_COUNT_AT = 57
_RECORDS_AT = 61
_CONTROL_FLAG = 0x20
_COMPRESSION_MASK = 0x07


class StateLogError(ValueError):
    """A batch of a state topic that this reader cannot take apart."""


def iter_records(data: bytes) -> Iterator[tuple[int, bytes, bytes | None]]:
    """``(offset, key, value)`` of every record in the whole v2 batches of ``data``.

    Control batches are skipped; a compressed batch raises ``StateLogError`` (Kafka
    writes its state topics uncompressed).
    """
    position = 0
    while position + _RECORDS_AT <= len(data):
        base_offset, batch_length = _BATCH_PREFIX.unpack_from(data, position)
        end = position + _LOG_OVERHEAD + batch_length
        if end > len(data):
            return
        (attributes,) = _I16.unpack_from(data, position + _ATTRIBUTES_AT)
        if attributes & _COMPRESSION_MASK:
            raise StateLogError(f"compressed state batch at offset {base_offset}")
        if not attributes & _CONTROL_FLAG:
            (count,) = _I32.unpack_from(data, position + _RECORD_COUNT_AT)
            yield from _records(data[position + _RECORDS_AT : end], base_offset, count)
        position = end


def _records(
    body: bytes, base_offset: int, count: int
) -> Iterator[tuple[int, bytes, bytes | None]]:
    position = 0
    for _ in range(count):
        length, position = read_varint(body, position)
        record_end = position + length
        position += 1  # attributes
        _timestamp_delta, position = read_varint(body, position)
        offset_delta, position = read_varint(body, position)
        key_length, position = read_varint(body, position)
        key = body[position : position + max(key_length, 0)]
        position += max(key_length, 0)
        value_length, position = read_varint(body, position)
        value = None if value_length < 0 else body[position : position + value_length]
        position = record_end
        yield base_offset + offset_delta, key, value


def next_batch_offset(data: bytes) -> int:
    """The offset after the last whole batch of ``data`` (control batches too), or -1."""
    position = 0
    next_offset = -1
    while position + _LAST_OFFSET_DELTA_AT + _I32.size <= len(data):
        base_offset, batch_length = _BATCH_PREFIX.unpack_from(data, position)
        end = position + _LOG_OVERHEAD + batch_length
        if end > len(data):
            break
        (last_delta,) = _I32.unpack_from(data, position + _LAST_OFFSET_DELTA_AT)
        next_offset = base_offset + last_delta + 1
        position = end
    return next_offset


def read_to_end(log: Log, chunk_bytes: int) -> Iterator[tuple[int, bytes, bytes | None]]:
    """Every record of ``log`` from its start to its end, ``chunk_bytes`` per read."""
    end_offset = log.log_end_offset
    next_offset = log.log_start_offset
    while next_offset < end_offset:
        fetched = log.read(next_offset, chunk_bytes, max_offset=end_offset)
        data = bytes(fetched.records.read_bytes())
        if not data:
            return
        last = next_offset - 1
        for offset, key, value in iter_records(data):
            last = offset
            if offset >= next_offset:
                yield offset, key, value
        next_offset = max(last + 1, next_batch_offset(data))
