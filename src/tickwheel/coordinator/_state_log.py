"""A coordinator's state topic read back: the records of a compacted internal topic.

The transaction coordinator (``__transaction_state``) and the share coordinator
(``__share_group_state``) keep their state the same way: one keyed record per change,
each in an uncompressed v2 batch of its own, the last value of a key winning and a null
value (a tombstone) removing it. When a broker becomes the leader of one of their
partitions it reads the partition from its log start to its log **end** -- not the high
watermark: a new leader's high watermark may lag records it already holds -- and
rebuilds its cache. ``read_to_end`` is that read; ``iter_records`` takes a chunk of the
log apart with the record format's batch walk and record decoder (``tickwheel.record``).

Pure functions over bytes and a ``Log`` read; the caller owns the log's thread.
"""

from __future__ import annotations

from collections.abc import Iterator

from tickwheel.log import Log
from tickwheel.record import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    decode_records,
    iter_batches,
    whole_batches_end,
)


class StateLogError(ValueError):
    """A batch of a state topic that this reader cannot take apart."""


def iter_records(data: bytes) -> Iterator[tuple[int, bytes, bytes | None]]:
    """``(offset, key, value)`` of every record in the whole v2 batches of ``data``.

    Control batches are skipped; a compressed batch raises ``StateLogError`` (Kafka
    writes its state topics uncompressed).
    """
    for position, header in iter_batches(data):
        if header.attributes & COMPRESSION_CODEC_MASK:
            raise StateLogError(f"compressed state batch at offset {header.base_offset}")
        if not header.attributes & CONTROL_FLAG_MASK:
            batch = data[position : position + header.size_bytes]
            for record in decode_records(batch, header):
                key = b"" if record.key is None else record.key
                yield header.base_offset + record.offset_delta, key, record.value


def read_to_end(
    log: Log, chunk_bytes: int, *, start_offset: int = 0
) -> Iterator[tuple[int, bytes, bytes | None]]:
    """Every record of ``log`` from ``start_offset`` (or its log start, if later) to its
    end, ``chunk_bytes`` per read."""
    end_offset = log.log_end_offset
    next_offset = max(start_offset, log.log_start_offset)
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
        next_offset = max(last + 1, whole_batches_end(data)[1])
